"""Ingest throughput: one process against Ray with 1 and 2 local workers.

    nice -n 19 python benchmarks/ingest.py [--docs 300] [--embedder local:all-MiniLM-L6-v2]

Ingests the first ``--docs`` SciFact abstracts (a BEIR corpus slice) into a fresh SQLite store
each time and prints documents and chunks per second, wall clock including Ray's start-up
(printed apart). The embedder dominates with the local model; ``--embedder hashing:384``
shows the pipeline's own overhead instead. On a shared 2-core machine the numbers are noisy.

2026-11-30, 100 abstracts (223 chunks), local all-MiniLM-L6-v2, nice 19:

  machine quiet (load ~3)   docs/s  chunks/s  seconds  ray start s
  single process              3.22      7.17     31.1
  ray, 1 worker               2.71      6.04     36.9          4.9
  ray, 2 workers              2.56      5.72     39.0          4.7

  machine busy (load ~25)
  single process              0.72      1.60    139.8
  ray, 1 worker               0.68      1.51    147.3         24.2
  ray, 2 workers              0.92      2.05    108.6         13.2

On one 2-core machine Ray cannot beat the single process, whose torch already uses both
cores; each worker also loads the model once. Ray is for more machines than one.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.benchcache import shared_data  # noqa: E402
from citewise import distributed  # noqa: E402
from citewise.embedders import DEFAULT_EMBEDDER, get_embedder  # noqa: E402
from citewise.engine import Engine  # noqa: E402
from citewise.stores.sqlite import SQLiteStore  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--docs", type=int, default=300)
    ap.add_argument("--embedder", default=DEFAULT_EMBEDDER)
    ap.add_argument("--corpus", help="a BEIR corpus.jsonl (default: SciFact's in shared/data)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        source = Path(tmp) / "corpus.jsonl"
        with open(args.corpus or shared_data("scifact") / "corpus.jsonl", encoding="utf-8") as f:
            source.write_text("".join(line for _, line in zip(range(args.docs), f, strict=False)))
        get_embedder(args.embedder).embed(["warm up the model in this process"])
        print(f"{args.docs} SciFact abstracts, embedder {args.embedder}")
        print(f"{'path':<16} {'docs':>5} {'chunks':>7} {'seconds':>8} {'docs/s':>7} {'chunks/s':>9} "
              f"{'ray start s':>11}")
        for label, workers in (("single process", 0), ("ray, 1 worker", 1), ("ray, 2 workers", 2)):
            store = SQLiteStore(Path(tmp) / f"{label.replace(' ', '_').replace(',', '')}.db")
            engine = Engine(store)
            kb = engine.open_kb("bench", embedder=args.embedder)
            startup = float("nan")
            t = time.perf_counter()
            if workers:
                distributed.start("local", workers)
                startup = time.perf_counter() - t
                report = distributed.ingest(store.url, "bench", [source], "local", workers)
            else:
                report = engine.ingest(kb, [source])
            seconds = time.perf_counter() - t
            docs = len(report.added)
            print(f"{label:<16} {docs:>5} {report.chunks:>7} {seconds:8.1f} {docs / seconds:7.2f} "
                  f"{report.chunks / seconds:9.2f} {startup:11.1f}", flush=True)
            store.close()


if __name__ == "__main__":
    main()
