"""Refusal you can trust, measured: calibrate the gate on SciFact and check it on held-out questions.

    python -m benchmarks.refusal [--thin 100] [--seed 13] [--max-covered-refusal 0.05] [--plot FILE]
                                 [--gate-only]

The calibration set, built from real data:

- **covered**: SciFact test claims whose relevant abstracts are all in the knowledge base;
- **thin**: test claims (a fixed-seed sample of ``--thin``) whose relevant abstracts were
  deleted from the knowledge base: on topic, not covered. A claim that shares only some of
  its abstracts with them is left out (neither covered nor thin);
- **out_of_scope**: the 1,000 computer-science paper titles of SciDocs' test topics.

The knowledge base is SciFact (5,183 abstracts) ingested with the default local model
(all-MiniLM-L6-v2) and the default ``sections`` chunker, cached at ``.bench/scifact-default.db``
(built here if missing, several minutes); a copy with the thin claims' abstracts deleted is
cached beside it. Every bucket is split in half with a fixed seed: `citewise calibrate`'s own
sweep (``citewise.calibration``) chooses the policy and threshold on one half, and the table
reports each bucket's refusal rate on the other half with exact Clopper-Pearson 95% intervals,
for the chosen policy, for every other policy calibrated the same way on the same half (``top1``
is the clinical system's gate), and for the shipped defaults (measured on the sample
collection, never on SciFact). Then every held-out question is asked end to end at the chosen
gate (``citewise.end_to_end``: the knowledge base's generator and the citation check too, as
``ask`` runs them), and the table gives the gate-only and end-to-end refusal rates side by
side, where refusals happened, and the share of covered claims answered citing one of their
abstracts (``--gate-only`` skips this).
Targets on the held-out half: out of scope refused >= 95%, covered refused <= 5%.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import os
import random
import sqlite3
import sys
import time
from dataclasses import replace
from pathlib import Path

from benchmarks.benchcache import shared_data
from citewise import calibration, end_to_end, gate
from citewise.documents import load_beir
from citewise.embedders import DEFAULT_EMBEDDER
from citewise.engine import Engine
from citewise.querysets import LabelledQuery, load_queries
from citewise.stores.sql import SQLStore
from citewise.stores.sqlite import open_sqlite

ROOT = Path(__file__).resolve().parent.parent

CACHE = ROOT / ".bench"



def build_full(path: Path, corpus: Path, embedder: str) -> None:
    """Ingest the whole corpus into ``path`` (built under a temporary name, renamed when done)."""
    from tqdm import tqdm

    tmp = path.with_suffix(f".building-{os.getpid()}")
    store = open_sqlite(tmp)
    engine = Engine(store)
    kb = engine.open_kb("bench", embedder=embedder, chunker="sections")
    with tqdm(total=5183, unit="doc", desc="ingest SciFact", leave=False) as bar:
        engine.ingest(kb, load_beir(corpus), progress=bar.update)
    store.db.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    store.close()
    os.replace(tmp, path)


def thin_store(full: Path, removed: set[str]) -> tuple[SQLStore, str]:
    """A copy of the full knowledge base without the ``removed`` abstracts (cached by that set)."""
    key = hashlib.sha256(json.dumps([str(full.resolve()), sorted(removed)]).encode()).hexdigest()[:10]
    path = CACHE / f"scifact-refusal-{key}.db"
    if not path.exists():
        tmp = path.with_suffix(f".building-{os.getpid()}")
        src, dst = sqlite3.connect(full), sqlite3.connect(tmp)
        src.backup(dst)
        src.close()
        dst.close()
        store = open_sqlite(tmp)
        kb = store.list_kbs()[0]
        for doc_id in sorted(removed):
            store.delete_document(kb, doc_id)
        store.db.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        store.close()
        os.replace(tmp, path)
    store = open_sqlite(path)
    return store, store.list_kbs()[0].name


def buckets(scifact: Path, scidocs: Path, n_thin: int, seed: int) -> tuple[list[LabelledQuery], set[str]]:
    claims = load_queries(scifact / "queries.jsonl", scifact / "qrels" / "test.tsv")
    rng = random.Random(seed)
    thin = rng.sample(claims, n_thin)
    removed = {d for q in thin for d in q.relevant}
    out = []
    for q in claims:
        hit = set(q.relevant) & removed
        if not hit:
            out.append(LabelledQuery(q.id, q.query, q.relevant, "answer", "covered"))
        elif hit == set(q.relevant):
            out.append(LabelledQuery(q.id, q.query, {}, "refuse", "thin"))
    with gzip.open(scidocs / "topics.test.tsv.gz", "rt", encoding="utf-8") as f:
        for line in f:
            topic_id, _, title = line.rstrip("\n").partition("\t")
            if title.strip():
                out.append(LabelledQuery(f"scidocs-{topic_id}", title.strip(), {}, "refuse", "out_of_scope"))
    return out, removed


def halves(queries: list[LabelledQuery], seed: int) -> tuple[list[LabelledQuery], list[LabelledQuery]]:
    """Each bucket split in half with a fixed seed: (calibration, held out)."""
    rng = random.Random(seed + 1)
    cal, held = [], []
    for bucket in ("covered", "thin", "out_of_scope"):
        mine = [q for q in queries if q.bucket == bucket]
        rng.shuffle(mine)
        cal += mine[: len(mine) // 2]
        held += mine[len(mine) // 2:]
    return cal, held


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--thin", type=int, default=100, help="test claims whose abstracts are removed")
    ap.add_argument("--seed", type=int, default=13)
    ap.add_argument("--max-covered-refusal", type=float, default=0.05)
    ap.add_argument("--policy", default="auto")
    ap.add_argument("--plot", type=Path, help="write the calibration half's plot here")
    ap.add_argument("--base", type=Path, default=CACHE / "scifact-default.db",
                    help="the full SciFact knowledge base (built here if missing)")
    ap.add_argument("--embedder", default=DEFAULT_EMBEDDER, help="what the base must be embedded with")
    ap.add_argument("--gate-only", action="store_true",
                    help="report the gate alone: do not ask the held-out questions end to end")
    args = ap.parse_args()

    scifact, scidocs = shared_data("scifact"), shared_data("scidocs")
    CACHE.mkdir(exist_ok=True)
    full = args.base
    if not full.exists():
        print(f"building {full} (SciFact with {args.embedder}, sections chunker) ...", flush=True)
        build_full(full, scifact / "corpus.jsonl", args.embedder)
    queries, removed = buckets(scifact, scidocs, args.thin, args.seed)
    store, kb_name = thin_store(full, removed)
    engine = Engine(store)
    kb = store.get_kb(kb_name)
    if (kb.config.embedder, kb.config.chunker) != (args.embedder, "sections"):
        sys.exit(f"{full} holds {kb.config.embedder} / {kb.config.chunker}, not {args.embedder} / sections")
    cal, held = halves(queries, args.seed)

    started = time.perf_counter()
    from tqdm import tqdm

    with tqdm(total=len(cal) + len(held), unit="q", desc="signals", leave=False) as bar:
        cal_obs = calibration.collect(engine, kb, cal, progress=bar.update)
        held_obs = calibration.collect(engine, kb, held, progress=bar.update)
    per_query_ms = (time.perf_counter() - started) * 1000 / len(queries)
    result = calibration.calibrate(cal_obs, args.policy, args.max_covered_refusal)
    top1 = calibration.calibrate_policy(cal_obs, "top1", args.max_covered_refusal)
    default = gate.default_setting(kb.config)
    if args.plot:
        from citewise.calibration_plot import plot

        plot(cal_obs, result, args.plot, "SciFact calibration half: refusal rate against threshold")

    docs = len(store.list_documents(kb))
    print(f"SciFact knowledge base: {docs} abstracts ({len(removed)} removed for the thin bucket), "
          f"{store.count_chunks(kb)} chunks, {kb.config.embedder}, {kb.config.chunker} chunker")
    counts = {b: (sum(q.bucket == b for q in cal), sum(q.bucket == b for q in held))
              for b in ("covered", "thin", "out_of_scope")}
    print("questions (calibration / held out): "
          + ", ".join(f"{b} {c}/{h}" for b, (c, h) in counts.items())
          + f"; seed {args.seed}; {per_query_ms:.0f} ms per question (2 shared cores, noisy)")
    print(f"\ncalibrated on the calibration half, at most {args.max_covered_refusal:.0%} of covered refused; "
          "policies compared there:")
    for p in sorted(result.compared, key=lambda p: -p.score):
        print(f"  {'*' if p is result.chosen else ' '} {p.policy:<14} threshold {p.threshold:7.4f}  "
              f"refuses {p.score:6.1%} of thin+out-of-scope (bucket mean)  AUC {p.auc:.3f}")
    print("\nHELD-OUT HALF: refusal rate per bucket, exact Clopper-Pearson 95% intervals")
    rows = [(f"calibrated ({args.policy})", result.chosen.policy, result.chosen.threshold)]
    rows += [("  compared", p.policy, p.threshold) for p in result.compared if p is not result.chosen]
    if args.policy != "auto":
        rows.append(("top1 calibrated", "top1", top1.threshold))
    rows.append(("shipped default", default.policy, default.threshold))
    if default.policy != "top1" and (kb.config.embedder, "top1") in gate.DEFAULT_THRESHOLDS:
        rows.append(("shipped top1", "top1", gate.DEFAULT_THRESHOLDS[(kb.config.embedder, "top1")]))
    print(calibration.rate_table([(label, p, t, calibration.rates_at(held_obs, p, t))
                                  for label, p, t in rows]))
    chosen = {r.bucket: r for r in calibration.rates_at(held_obs, result.chosen.policy,
                                                         result.chosen.threshold)}
    met_oos = chosen["out_of_scope"].rate >= 0.95
    met_cov = chosen["covered"].rate <= args.max_covered_refusal
    print(f"\ntargets (calibrated gate, held out): out of scope >= 95%: "
          f"{'met' if met_oos else 'NOT met'} ({chosen['out_of_scope'].rate:.1%}); covered <= "
          f"{args.max_covered_refusal:.0%}: {'met' if met_cov else 'NOT met'} "
          f"({chosen['covered'].rate:.1%}); thin refused {chosen['thin'].rate:.1%}")
    summary = {"policy": result.chosen.policy, "threshold": result.chosen.threshold,
               "held_out": [r.as_dict() for r in chosen.values()], "end_to_end": None}
    if not args.gate_only:
        gated = replace(kb, config=replace(kb.config,
                                           gate=calibration.setting_for(kb.config, result)))
        with tqdm(total=len(held), unit="q", desc="end to end", leave=False) as bar:
            outcomes = end_to_end.run(engine, gated, held, progress=bar.update)
        e2e = end_to_end.summarise(outcomes, gated.config.generator)
        print("\nHELD-OUT HALF at the calibrated gate: the gate alone and end to end, exact "
              "Clopper-Pearson 95% intervals")
        print(end_to_end.table(e2e))
        summary["end_to_end"] = end_to_end.to_dict(e2e)
    print("json:", json.dumps(summary))


if __name__ == "__main__":
    main()
