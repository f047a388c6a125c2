"""Refusal you can trust, measured: calibrate the gate on SciFact and check it on held-out questions.

    python -m benchmarks.refusal [--thin 100] [--seed 13] [--max-covered-refusal 0.05]
                                 [--confidence 0.95] [--policy auto] [--plot FILE] [--gate-only]

The calibration set, built from real data:

- **covered**: SciFact test claims whose relevant abstracts are all in the knowledge base;
- **thin**: test claims (a fixed-seed sample of ``--thin``) whose relevant abstracts were
  deleted from the knowledge base: on topic, not covered. A claim that shares only some of
  its abstracts with them is left out (neither covered nor thin);
- **out_of_scope**: the 1,000 computer-science paper titles of SciDocs' test topics.

The knowledge base is SciFact (5,183 abstracts) ingested with the default local model
(all-MiniLM-L6-v2) and the default ``sections`` chunker, cached at ``.bench/scifact-default.db``
(built here if missing, long on a busy machine); a copy with the thin claims' abstracts deleted
is cached beside it. Every question's gate signals are read and it is asked end to end once
with the gate open (the knowledge base's generator and the citation check, as ``ask`` runs
them), so any threshold's end-to-end outcome is known without asking again
(``end_to_end.at_gate``). Every bucket is split in half with a fixed seed: `citewise
calibrate`'s own procedure (``citewise.calibrate.calibration``: thresholds counted end to end, every
policy compared under 5-fold cross-validation, ``learned`` fitted there too) runs on one half
only; the other half is read only to report. For every policy calibrated on the calibration
half, for the chosen policy under the 95% guarantee (``--confidence``), and for the shipped
default (measured on the sample collection, never on SciFact), the table gives each bucket's
held-out refusal rate with its exact Clopper-Pearson 95% interval, the gate alone and end to
end; then the chosen gate's end-to-end table (where refusals happened, covered claims answered
citing one of their abstracts), and each signal's ROC AUC on both halves.
Targets (issue #19, held out): out of scope >= 95%, covered <= 5%, thin >= 50%.
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
from citewise.answer import gate
from citewise.calibrate import calibration, end_to_end
from citewise.calibrate import tables as calibration_tables
from citewise.calibrate.querysets import LabelledQuery, load_queries
from citewise.embedders import DEFAULT_EMBEDDER
from citewise.engine import Engine
from citewise.errors import QueryError
from citewise.ingest.documents import load_beir
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
    ap.add_argument("--confidence", type=float, default=None,
                    help="choose thresholds with the guarantee at this confidence (else the point "
                    "estimate; the chosen policy is shown under the 95%% guarantee too)")
    ap.add_argument("--policy", default="auto")
    ap.add_argument("--plot", type=Path, help="write the calibration half's plot here")
    ap.add_argument("--base", type=Path, default=CACHE / "scifact-default.db",
                    help="the full SciFact knowledge base (built here if missing)")
    ap.add_argument("--embedder", default=DEFAULT_EMBEDDER, help="what the base must be embedded with")
    ap.add_argument("--gate-only", action="store_true",
                    help="count the gate alone: do not ask the questions end to end")
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

    passes = 1 if args.gate_only else 2
    with tqdm(total=(len(cal) + len(held)) * passes, unit="q", desc="signals and answers",
              leave=False) as bar:
        cal_obs = calibration.collect(engine, kb, cal, progress=bar.update, answers=not args.gate_only)
        held_obs = calibration.collect(engine, kb, held, progress=bar.update, answers=not args.gate_only)
    per_query_ms = (time.perf_counter() - started) * 1000 / len(queries)
    result = calibration.calibrate(cal_obs, args.policy, args.max_covered_refusal,
                                   guarantee=args.confidence)
    if args.plot:
        from citewise.calibrate.plot import plot

        plot(cal_obs, result, args.plot, "SciFact calibration half: refusal rate against threshold")

    docs = len(store.list_documents(kb))
    print(f"SciFact knowledge base: {docs} abstracts ({len(removed)} removed for the thin bucket), "
          f"{store.count_chunks(kb)} chunks, {kb.config.embedder}, {kb.config.chunker} chunker")
    counts = {b: (sum(q.bucket == b for q in cal), sum(q.bucket == b for q in held))
              for b in ("covered", "thin", "out_of_scope")}
    print("questions (calibration / held out): "
          + ", ".join(f"{b} {c}/{h}" for b, (c, h) in counts.items())
          + f"; seed {args.seed}; {per_query_ms:.0f} ms per question"
          + ("" if args.gate_only else " (signals, and asked end to end with the gate open)")
          + " (2 shared cores, noisy)")
    rule = ("point estimate" if args.confidence is None
            else f"exact upper bound within budget at {args.confidence:.0%} confidence")
    print(f"\ncalibrated on the calibration half: at most {args.max_covered_refusal:.0%} of covered "
          f"refused, counted {'end to end' if result.end_to_end else 'at the gate'} ({rule})")
    print(calibration_tables.comparison(result))
    print("\ncalibration half: " + calibration_tables.signals(result))
    held_aucs = calibration.signal_aucs(held_obs)
    print("held-out half: " + calibration_tables.signals(replace(result, signals=held_aucs)))
    if result.chosen.model is not None:
        m = result.chosen.model
        print("\nlearned model (standardised signals): "
              + ", ".join(f"{f} {c:+.2f}" for f, c in zip(m.features, m.coef, strict=True))
              + f", intercept {m.intercept:+.2f}")

    rows = [(("* " if p is result.chosen else "  ") + "calibrated", p) for p in result.compared]
    if args.confidence is None:
        try:
            sure = calibration.calibrate(cal_obs, result.chosen.policy, args.max_covered_refusal,
                                         guarantee=0.95).chosen
            rows.append(("  chosen, 95% certain", sure))
        except QueryError as e:
            print(f"\n(no certified threshold for {result.chosen.policy}: {e})")
    default = gate.default_setting(kb.config)
    rows.append(("  shipped default", calibration.PolicyResult(
        default.policy, default.threshold, (), 0.0, float("nan"))))
    print("\nHELD-OUT HALF: refusal rate per bucket, exact Clopper-Pearson 95% intervals, "
          "the gate alone and end to end (* auto's choice)")
    print(calibration_tables.held_out(rows, held_obs))

    chosen = result.chosen
    the_gate = gate.ThresholdGate(chosen.policy, chosen.threshold, model=chosen.model)
    gate_rates = {r.bucket: r for r in calibration.rates_at(held_obs, chosen.policy, chosen.threshold,
                                                            model=chosen.model)}
    summary = {"policy": chosen.policy, "threshold": chosen.threshold,
               "held_out": [r.as_dict() for r in gate_rates.values()], "end_to_end": None}
    targets = [("gate alone", gate_rates)]
    if not args.gate_only:
        e2e = end_to_end.summarise(end_to_end.at_gate(held_obs, the_gate), kb.config.generator)
        print("\nHELD-OUT HALF at the chosen gate: the gate alone and end to end")
        print(end_to_end.table(e2e))
        summary["end_to_end"] = end_to_end.to_dict(e2e)
        targets.append(("end to end", {r.bucket: r for r in e2e.buckets}))
    print("\ntargets (issue #19, held out): out of scope >= 95%, covered <= 5%, thin >= 50%")
    for label, rates in targets:
        met = [rates["out_of_scope"].rate >= 0.95, rates["covered"].rate <= 0.05,
               rates["thin"].rate >= 0.50]
        print(f"  {label:<11} out of scope {rates['out_of_scope'].rate:6.1%} "
              f"{'met' if met[0] else 'NOT met'}; covered {rates['covered'].rate:6.1%} "
              f"{'met' if met[1] else 'NOT met'}; thin {rates['thin'].rate:6.1%} "
              f"{'met' if met[2] else 'NOT met'}")
    print("json:", json.dumps(summary))


if __name__ == "__main__":
    main()
