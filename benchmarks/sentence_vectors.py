"""Sentence vectors at ingest: what they cost to ingest and store, what they save per question,
and whether float16 storage changes any answer.

    nice -n 10 python -m benchmarks.sentence_vectors [--embedder local:all-MiniLM-L6-v2]

For the sample collection (its test split's questions) and the SciFact slice of the tests (200
abstracts, 40 claims) it ingests each collection twice into fresh SQLite stores: without
sentence vectors (as before migration m006) and with them (float32); a third store is the
float32 one with its sentence rows rewritten as float16. Every question is then asked of each
store with the process's sentence cache emptied first (a cold question), and the answers
compared with the store without sentence vectors: status, text or reason, the chunks cited and
every sentence the citation check dropped, with its reason. Prints ingest time, the sentence
rows' size, mean question time and how many texts an answered question embedded besides
the question (whose vector comes from retrieval).

2026-11-30, local all-MiniLM-L6-v2, nice 10, 2 cores shared with other jobs at load average
9-12 (times are several times a quiet machine's; ratios hold better):

  collection     store           docs  ingest s  docs/s  sent. MB    q ms embedded/q answered    same
  scifact-slice  no sentences     200     323.3    0.62      0.00   11002       41.0       28  40/40
  scifact-slice  float32          200     763.3    0.26      7.54     278        0.0       28  40/40
  scifact-slice  float16          200    (copy)               3.79     307        0.0       28  39/40

(the "embedded/q" column of that run printed one less, the question it no longer embeds.)
Sentence vectors make ingest ~2.4x slower and add ~38 KB per abstract (float32); a cold
question goes from 11 s to 0.28 s here. float16 halves the rows but changed one SciFact
answer of 40, so rows are float32.

``--compare REV`` (``--keep DIR`` reuses each side's results, ``--cache FILE.npz`` the
standalone SciFact vectors of ``citations.py``) ingests the sample with the default model on
REV's citewise and on this tree's, counting what the model is given, asks the 60 test
questions on each, and runs ``citations.compare`` (standalone vs in-context passage
sentences, each at its shipped threshold). 2026-12-01, REV f252397 (m006: every text embedded
on its own) against late chunking (one pass per chunk, threshold 0.59):

  measure                                                          before      after
  sample test, covered: answered / citation_check / gate       26 / 2 / 2 26 / 2 / 2
  sample test, thin: answered / gate                                1 / 14     1 / 14
  sample test, out_of_scope: gate                                       15         15
  sample test: same outcome (status and text)                            -      49/60
  sample test: same sentences chosen (answered by both)                  -      16/27
  sample test: answers citing a labelled source / answered           26/27      26/27
  SciFact test claims, abstract: precision / recall                .773/.667  .783/.652
  SciFact test claims, abstract: F1 / NEI rejection                .716/.850  .711/.841
  SciFact test claims, abstract: balanced accuracy                     .701       .698
  SciFact train claims, abstract: balanced accuracy                    .697       .699
  SciFact test claims, rationale: precision / recall               .825/.382  .828/.390
  SciFact test claims, rationale: F1 / balanced accuracy           .523/.614  .530/.617
  ingest of the sample (163 chunks): model texts per chunk             7.53       1.00
  ingest of the sample (163 chunks): model tokens per chunk          345.01      87.13

Of the 11 answers whose sentences changed, most now quote the sentence that answers (the
renal-impairment dose, the "4 Ds", varenicline's mechanism) and one lost its best sentence
(alcohol as a trigger).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import numpy as np

from citewise.answer import sentence_vectors
from citewise.embedders import DEFAULT_EMBEDDER, get_embedder
from citewise.embedders import base as embedders_base
from citewise.engine import Engine
from citewise.stores.sqlite import open_sqlite

ROOT = Path(__file__).resolve().parent.parent

COLLECTIONS = {
    "sample": (ROOT / "examples" / "smoking-cessation",
               ROOT / "examples" / "queries" / "smoking-cessation.test.jsonl", "query"),
    "scifact-slice": (ROOT / "tests" / "data" / "scifact-slice" / "corpus.jsonl",
                      ROOT / "tests" / "data" / "scifact-slice" / "queries.jsonl", "text"),
}


def to_float16(path: Path) -> None:
    store = open_sqlite(path)
    rows = store.db.conn.execute("SELECT chunk_key, vectors FROM chunk_sentences").fetchall()
    with store.db.transaction() as cur:
        for key, blob in rows:
            half = np.frombuffer(blob, np.float32).astype(np.float16).tobytes()
            cur.execute("UPDATE chunk_sentences SET dtype = 'f2', vectors = %s WHERE chunk_key = %s",
                        (half, key))
    store.db.conn.execute("VACUUM")
    store.close()


def outcome(result: object) -> tuple:
    if result.status == "answered":  # type: ignore[attr-defined]
        return ("answered", result.text, tuple(c.chunk_id for c in result.citations),  # type: ignore[attr-defined]
                result.dropped)  # type: ignore[attr-defined]
    return ("refused", result.path, result.reason)  # type: ignore[attr-defined]


def ask_all(path: Path, questions: list[str]) -> tuple[list[tuple], float, float]:
    """Outcomes, mean seconds per cold question, mean texts embedded per answered question by
    the generator and the citation check (the question's vector comes from retrieval)."""
    engine = Engine(open_sqlite(path))
    kb = engine.store.get_kb("kb")
    embedded: list[int] = []
    real = sentence_vectors.for_context

    def counting(*args, **kw):  # type: ignore[no-untyped-def]
        found = real(*args, **kw)
        embedded.append(0)
        inner = found.embed

        def embed(texts, **k):  # type: ignore[no-untyped-def]
            before = found.embedded
            out = inner(texts, **k)
            embedded[-1] += found.embedded - before
            return out

        found.embed = embed  # type: ignore[method-assign]
        return found

    sentence_vectors.for_context = counting  # type: ignore[assignment]
    out, seconds = [], 0.0
    try:
        for q in questions:
            embedders_base.clear_cache()
            t = time.perf_counter()
            out.append(outcome(engine.ask(kb, q)))
            seconds += time.perf_counter() - t
    finally:
        sentence_vectors.for_context = real  # type: ignore[assignment]
    return out, seconds / len(questions), float(np.mean(embedded)) if embedded else 0.0


def side(out: Path) -> None:
    """Ingest the sample with the default embedder, counting what the model is given, and ask
    its test split: written to ``out`` as JSON. Runs on whichever citewise is imported."""
    model = get_embedder(DEFAULT_EMBEDDER)
    seen = {"calls": 0, "texts": 0, "tokens": 0, "on": False}

    def count(texts: list[str]) -> None:
        if seen["on"]:
            seen["calls"] += 1
            seen["texts"] += len(texts)
            # with [CLS] and [SEP], as the model is given each text
            seen["tokens"] += sum(model.count_tokens(t) + 2 for t in texts)  # type: ignore[attr-defined]

    def spy(owner: type, name: str) -> None:
        real = getattr(owner, name)

        def counting(self, texts, *args, **kw):  # type: ignore[no-untyped-def]
            count([texts] if isinstance(texts, str) else list(texts))
            return real(self, texts, *args, **kw)

        setattr(owner, name, counting)

    if hasattr(type(model), "embed_tokens"):  # the model runs on ONNX Runtime: its own calls
        spy(type(model), "embed")
        spy(type(model), "embed_tokens")
    else:  # a revision whose ingest ran sentence-transformers
        from sentence_transformers import SentenceTransformer

        spy(SentenceTransformer, "encode")
    source, queries, _ = COLLECTIONS["sample"]
    rows = [json.loads(line) for line in queries.read_text().splitlines() if line.strip()]
    with tempfile.TemporaryDirectory() as tmp:
        engine = Engine(open_sqlite(Path(tmp) / "kb.db"))
        kb = engine.open_kb("kb", embedder=DEFAULT_EMBEDDER)
        seen["on"] = True
        report = engine.ingest(kb, [source])
        seen["on"] = False
        answers = []
        for row in rows:  # not timed: no cache to clear (and older revisions have no clear_cache)
            r = engine.ask(kb, row["query"])
            answered = r.status == "answered"  # type: ignore[attr-defined]
            answers.append({"bucket": row["bucket"], "sources": row.get("sources", []),
                            "status": r.status if answered else r.path,  # type: ignore[attr-defined]
                            "text": r.text if answered else "",  # type: ignore[attr-defined]
                            "docs": [c.doc_id for c in r.citations] if answered else []})  # type: ignore[attr-defined]
    out.write_text(json.dumps({"chunks": report.chunks, **{k: seen[k] for k in ("calls", "texts", "tokens")},
                               "answers": answers}))


def compare(before: str, scifact: bool, keep: Path | None, cache: Path | None) -> None:
    """One table: the sample's test split, the citation check on SciFact test claims and what
    ingest embeds per chunk, for revision ``before`` and for this tree. ``keep``: a folder
    where each side's results are kept and reused by the next run."""
    sides = {}
    with tempfile.TemporaryDirectory() as tmp:
        old = Path(tmp) / "before"
        old.mkdir()
        archive = subprocess.run(["git", "-C", str(ROOT), "archive", before, "citewise"],
                                 check=True, capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", str(old)], input=archive, check=True)
        # a revision from before citewise/__init__.py was a namespace package, and this tree's
        # regular package would be imported instead of it, wherever it stands on the path
        (old / "citewise" / "__init__.py").touch()
        for label, code in (("before", old), ("after", ROOT)):
            out = (keep or Path(tmp)) / f"{label}.json"
            if not out.exists():
                # run from the revision's folder, so its citewise comes first; this benchmarks package after
                env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(code), str(ROOT)])}
                command = [sys.executable, "-m", "benchmarks.sentence_vectors", "--side", str(out.resolve())]
                subprocess.run(command, env=env, cwd=code, check=True)
            sides[label] = json.loads(out.read_text())
    b, a = sides["before"], sides["after"]
    rows: list[tuple[str, str, str]] = []
    for bucket in ("covered", "thin", "out_of_scope"):
        for s in (b, a):
            s[bucket] = Counter(x["status"] for x in s["answers"] if x["bucket"] == bucket)
        keys = sorted(set(b[bucket]) | set(a[bucket]))
        rows.append((f"sample test, {bucket}: " + " / ".join(keys),
                     *(" / ".join(str(s[bucket][k]) for k in keys) for s in (b, a))))
    pairs = list(zip(b["answers"], a["answers"], strict=True))
    both = [(x, y) for x, y in pairs if x["status"] == y["status"] == "answered"]
    same = sum(x["status"] == y["status"] and x["text"] == y["text"] for x, y in pairs)
    rows.append(("sample test: same outcome (status and text)", "-", f"{same}/{len(pairs)}"))
    rows.append(("sample test: same sentences chosen (answered by both)", "-",
                 f"{sum(x['text'] == y['text'] for x, y in both)}/{len(both)}"))
    for s in (b, a):
        s["labelled"] = sum(x["status"] == "answered" and bool(set(x["docs"]) & set(x["sources"]))
                            for x in s["answers"])
        s["answered"] = sum(x["status"] == "answered" for x in s["answers"])
    rows.append(("sample test: answers citing a labelled source / answered",
                 f"{b['labelled']}/{b['answered']}", f"{a['labelled']}/{a['answered']}"))
    if scifact:
        from benchmarks import citations

        found = citations.compare(["alone", "context"], citations.shared_data("scifact"),
                                  DEFAULT_EMBEDDER, cache)
        names = {"precision": "precision", "recall": "recall", "f1": "F1",
                 "nei_reject": "NEI rejection", "balanced": "balanced accuracy",
                 "train_bal": "balanced accuracy"}
        for passage in ("abstract", "rationale"):
            got = {r["method"]: r for r in found
                   if r["passage"] == passage and r["setting"].startswith("shipped")}
            for key, name in names.items():
                if passage == "rationale" and key == "nei_reject":
                    continue
                split = "train" if key == "train_bal" else "test"
                rows.append((f"SciFact {split} claims, {passage}: citation check {name}",
                             f"{got['alone'][key]:.3f}", f"{got['context'][key]:.3f}"))
    for key in ("calls", "texts", "tokens"):
        rows.append((f"ingest of the sample ({b['chunks']} chunks): model {key} per chunk",
                     f"{b[key] / b['chunks']:.2f}", f"{a[key] / a['chunks']:.2f}"))
    print(f"\n{'measure':<66} {'before ' + before[:7]:>16} {'after':>10}")
    for name, x, y in rows:
        print(f"{name:<66} {x:>16} {y:>10}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--compare", metavar="REV", help="before/after table against revision REV")
    ap.add_argument("--no-scifact", action="store_true", help="with --compare: skip SciFact claims")
    ap.add_argument("--keep", type=Path, help="with --compare: keep (and reuse) each side's results here")
    ap.add_argument("--cache", type=Path, help="with --compare: an .npz of SciFact vectors (citations.py)")
    ap.add_argument("--side", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--embedder", default=DEFAULT_EMBEDDER)
    ap.add_argument("--collection", choices=list(COLLECTIONS), action="append",
                    help="Only this collection (repeatable); default: both")
    ap.add_argument("--questions", type=int, help="Ask only the first N of each collection")
    args = ap.parse_args()
    if args.side:
        return side(args.side)
    if args.compare:
        return compare(args.compare, not args.no_scifact, args.keep, args.cache)
    get_embedder(args.embedder).embed(["warm up the model in this process"])
    print(f"embedder {args.embedder}")
    print(f"{'collection':<14} {'store':<14} {'docs':>5} {'ingest s':>9} {'docs/s':>7} "
          f"{'sent. MB':>9} {'q ms':>7} {'embedded/q':>10} {'answered':>8} {'same':>7}")
    with tempfile.TemporaryDirectory() as tmp:
        for name, (source, queries, field) in COLLECTIONS.items():
            if args.collection and name not in args.collection:
                continue
            with queries.open() as f:
                questions = [json.loads(line)[field] for line in f if line.strip()]
            questions = questions[: args.questions]
            paths: dict[str, Path] = {}
            rows = []
            for label, with_sentences in (("no sentences", False), ("float32", True)):
                path = paths[label] = Path(tmp) / f"{name}-{label.replace(' ', '_')}.db"
                engine = Engine(open_sqlite(path))
                kb = engine.open_kb("kb", embedder=args.embedder)
                report = engine.ingest(kb, [source], sentences=with_sentences)
                engine.store.close()
                rows.append((label, len(report.added), report.seconds))
            paths["float16"] = Path(tmp) / f"{name}-float16.db"
            shutil.copy(paths["float32"], paths["float16"])
            to_float16(paths["float16"])
            rows.append(("float16", rows[1][1], float("nan")))
            baseline = None
            for label, docs, seconds in rows:
                store = open_sqlite(paths[label])
                (size,) = store.db.conn.execute(
                    "SELECT coalesce(sum(length(vectors) + length(text_keys)), 0) FROM chunk_sentences"
                ).fetchone()
                store.close()
                found, per_q, embedded = ask_all(paths[label], questions)
                baseline = baseline or found
                same = sum(a == b for a, b in zip(found, baseline, strict=True))
                answered = sum(o[0] == "answered" for o in found)
                timing = (f"{seconds:>9.1f} {docs / seconds:>7.2f}" if seconds == seconds
                          else f"{'(copy)':>9} {'':>7}")  # float16 rows rewritten from float32
                print(f"{name:<14} {label:<14} {docs:>5} {timing} "
                      f"{size / 2**20:>9.2f} {per_q * 1000:>7.0f} {embedded:>10.1f} {answered:>8} "
                      f"{same:>3}/{len(found)}", flush=True)


if __name__ == "__main__":
    main()
