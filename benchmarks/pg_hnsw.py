"""PostgreSQL's HNSW path against its exact path: recall@10, build and latency by setting.

    nice -n 19 python -m benchmarks.pg_hnsw --vectors scifact [--source STORE] [--chunks 100000]
        [--ef 200,300,400] [--builds 16:64,16:128] [--target 0.99] [--queries N]
    nice -n 19 python -m benchmarks.pg_hnsw [--chunks 20000] [--dim 128] [--spread 1.0]

One knowledge base in the pgserver wheel's PostgreSQL 16 with pgvector 0.6 (started on a free
port), ``ann_min_chunks`` below its size so ``dense_search`` goes through the store's own
per-knowledge-base partial HNSW index. ``--vectors scifact``: real MiniLM vectors, as
``scale.py`` makes them: each chunk a random real SciFact chunk's vector (from a built store,
``scifact_vectors.py``) plus gaussian noise of norm 0.5, renormalised; queries the real SciFact
claims. ``--vectors synthetic`` (the default): clustered random unit vectors (200 centres,
per-coordinate noise ``--spread`` times the centres' scale), queries split in halves. Each
``--builds`` m:ef_construction is built in turn (time and ``pg_relation_size``) and searched at
each ``--ef`` hnsw.ef_search with the train queries; the first build (list them cheapest first)
with an ef reaching ``--target`` train recall@10, at its smallest such ef, is the chosen
setting, and only that is run on the test queries. Recall@10 is against the exact search of the same store
(``dense_index(kb).search``, over the cached matrix after one untimed cold read), the baseline
row; latency is p50/p99 of single ``dense_search`` calls, k=10.

2026-11-30, ``--vectors scifact --source .bench/scifact-partial.db --chunks 100000`` (6,449
real chunks, 809 train / 300 test claims), put_document 37-46 s. Two runs at nice 10 beside
other jobs on 2 cores, so timings are noisy and only comparable within a run: run 1 (load
average 8.5-11.5) and run 2 (``--ef 200,300,400 --builds 16:128,24:128 --target 0.99``, load 14-19):

  run  m  efc  build s  index MB  ef_search  train R@10  p50/p99 ms
  1    exact (baseline)                         1.000   75.5/141.8
  1    16  64      299       205         40       0.819     7.6/21.6
  1                                     100       0.914    11.8/28.3
  1                                     200       0.960    18.9/46.7   <- the old defaults
  1                                     400       0.986    22.3/53.1   (test 0.979)
  1                                     800       0.997    43.8/83.7
  1    16 128      603       205         40       0.902     9.5/24.3
  1                                     100       0.960    14.0/63.2
  1                                     200       0.985    18.9/59.1
  1                                     400       0.996    25.5/56.9
  2    exact (baseline)                         1.000  101.0/238.8
  2    16 128      670       205        200       0.984    48.2/95.4
  2                                     300       0.993   69.3/124.3   <- chosen
  2                                     400       0.996  140.2/384.6
  2    test claims, m 16, efc 128, ef_search 300: recall@10 0.988, p50/p99 102.0/213.6 ms
       (exact 100.7/203.4 ms)

The old defaults (m 16, ef_construction 64, ef_search 200) reach 0.960 on real vectors, below
the 0.98 asked. Run 1 chose ef_search 400 at ef_construction 64 with target 0.98 (train 0.986),
and its test recall was 0.979: a train target of exactly 0.98 leaves no margin for the test
sample, so run 2 chose with target 0.99 (that decision was taken after seeing 0.979).
ef_construction 128 with ef_search 300 is the cheapest per query of the settings measured that
reach 0.99 on train (ef_construction 64 needs ef_search 800: 44 ms against 19-26 ms in run 1);
it doubles the build (the first search above ``ann_min_chunks`` waits for it; pgvector's
default ``maintenance_work_mem`` of 64 MB holds only part of a 205 MB graph). m 24 was not
measured: its build (ef_construction 128) had not finished after 36 minutes at load 14-19.
On synthetic vectors (20,000, dim 128, m 16, efc 64) spread 1.0 reaches 1.000 from ef_search
40 and spread 2.0 0.966 at 200 and 0.995 at 400.
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass

import numpy as np

from benchmarks.benchcache import p50_p99
from citewise.kb import KBConfig
from citewise.records import Chunk, Document, Section
from citewise.stores import postgres
from citewise.stores.sql import SQLStore
from citewise.testing.pgserver import start_pgvector

PER_DOC = 500
NOISE = 0.5  # as benchmarks/scale.py: cosine ~0.89 between a synthetic chunk and its source


@dataclass(frozen=True)
class Data:
    vectors: np.ndarray
    train: np.ndarray
    test: np.ndarray
    label: str


def clustered(rng: np.random.Generator, n: int, centres: np.ndarray, spread: float) -> np.ndarray:
    v = centres[rng.integers(len(centres), size=n)] + spread * rng.normal(size=(n, centres.shape[1]))
    return (v / np.linalg.norm(v, axis=1, keepdims=True)).astype(np.float32)


def synthetic(args: argparse.Namespace) -> Data:
    rng = np.random.default_rng(11)
    centres = rng.normal(size=(200, args.dim))
    vectors = clustered(rng, args.chunks, centres, args.spread)
    queries = clustered(rng, args.queries or 200, centres, args.spread)
    half = len(queries) // 2
    return Data(vectors, queries[:half], queries[half:],
                f"{args.chunks:,} synthetic chunks, dim {args.dim}, spread {args.spread}")


def scifact(args: argparse.Namespace) -> Data:
    """Perturbed real chunks (a random real chunk's MiniLM vector + gaussian noise of norm
    ``NOISE``, renormalised); queries are the real train / test claims."""
    from benchmarks.scifact_vectors import load_chunks, load_claims

    chunks, claims = load_chunks(args.source), load_claims()
    rng = np.random.default_rng(args.chunks)
    real = chunks.vectors
    src = rng.integers(0, len(real), args.chunks)
    noise = rng.normal(size=(args.chunks, real.shape[1])).astype(np.float32)
    v = real[src] + noise * (NOISE / np.sqrt(real.shape[1]))
    v /= np.linalg.norm(v, axis=1, keepdims=True)
    train, test = claims.of("train")[1], claims.of("test")[1]
    if args.queries:
        train, test = train[: args.queries], test[: args.queries]
    return Data(v.astype(np.float32), train, test,
                f"{args.chunks:,} perturbed SciFact chunks (from {len(real):,} real), dim {real.shape[1]}, "
                f"{len(train)} train / {len(test)} test claims")


def fill(store: SQLStore, data: Data) -> tuple[object, float]:
    dim = data.vectors.shape[1]
    kb = store.create_kb("bench", KBConfig(embedder=f"hashing:{dim}", dim=dim))
    t = time.perf_counter()
    for start in range(0, len(data.vectors), PER_DOC):
        part = data.vectors[start:start + PER_DOC]
        texts = tuple(f"chunk {start + i}" for i in range(len(part)))
        doc = Document(f"{start}.md", "T", (Section(("P",), texts),), f"{start}.md")
        store.put_document(kb, doc, [Chunk(doc.id, i, ("P",), t, "T") for i, t in enumerate(texts)], part)
    return kb, time.perf_counter() - t


def run(store: SQLStore, kb: object, queries: np.ndarray, exact: bool
        ) -> tuple[list[np.ndarray], list[float]]:
    found, times = [], []
    for q in queries:
        t = time.perf_counter()
        keys = (store.dense_index(kb).search(q, 10) if exact else store.dense_search(kb, q, 10))[0]
        times.append((time.perf_counter() - t) * 1000)
        found.append(keys)
    return found, times


def recall(found: list[np.ndarray], truth: list[np.ndarray]) -> float:
    pairs = zip(found, truth, strict=True)
    return float(np.mean([len(set(f.tolist()) & set(t.tolist())) / 10 for f, t in pairs]))


def rebuild(url: str, store: SQLStore, kb: object, m: int, ef_construction: int
            ) -> tuple[SQLStore, float, float]:
    """Drop the knowledge base's HNSW index and build it with these settings, on a store opened
    afresh (a store remembers the indexes it has built): (that store, seconds, MB)."""
    postgres.HNSW_M, postgres.HNSW_EF_CONSTRUCTION = m, ef_construction
    with store.db.transaction() as cur:
        cur.execute(f'DROP INDEX IF EXISTS "{postgres.hnsw_name(kb)}"')
    ann_min_chunks = store.ann_min_chunks
    store.close()
    store = postgres.open_postgres(url, ann_min_chunks=ann_min_chunks)
    t = time.perf_counter()
    store.prepare(kb)  # builds the index: the knowledge base is over ann_min_chunks
    seconds = time.perf_counter() - t
    (size,) = store.db.rows("SELECT pg_relation_size(%s::regclass)", (postgres.hnsw_name(kb),))[0]
    return store, seconds, size / 1e6


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--vectors", choices=["synthetic", "scifact"], default="synthetic")
    ap.add_argument("--source", help="--vectors scifact: a built SciFact store (default: the .bench cache)")
    ap.add_argument("--chunks", type=int, default=20000)
    ap.add_argument("--dim", type=int, default=128, help="--vectors synthetic only")
    ap.add_argument("--spread", type=float, default=1.0, help="--vectors synthetic only")
    ap.add_argument("--queries", type=int, default=0, help="queries per split (0: synthetic 100, all claims)")
    ap.add_argument("--ef", default="40,100,200,400", help="hnsw.ef_search values to measure")
    ap.add_argument("--builds", default=f"{postgres.HNSW_M}:{postgres.HNSW_EF_CONSTRUCTION}",
                    help="m:ef_construction settings to build, cheapest first")
    ap.add_argument("--target", type=float, default=0.98, help="train recall@10 a setting must reach")
    args = ap.parse_args()
    data = scifact(args) if args.vectors == "scifact" else synthetic(args)
    efs = [int(e) for e in args.ef.split(",")]
    builds = [tuple(int(x) for x in b.split(":")) for b in args.builds.split(",")]
    server = start_pgvector()
    try:
        store = postgres.open_postgres(server.url(), ann_min_chunks=min(1000, len(data.vectors)))
        kb, load = fill(store, data)
        store.dense_index(kb)  # the exact path's one cold read of the matrix, not timed
        truth = {split: run(store, kb, qs, exact=True)
                 for split, qs in (("train", data.train), ("test", data.test))}
        print(f"{data.label}; put_document {load:.0f} s (timings noisy: shared machine)")
        print(f"{'path':<30}{'build s':>8}{'index MB':>9}{'train R@10':>11}{'p50/p99 ms':>13}")
        print(f"{'exact (baseline)':<30}{'':>8}{'':>9}{1.0:>11.3f}{p50_p99(truth['train'][1]):>13}")
        chosen = None
        for m, efc in builds:
            store, seconds, mb = rebuild(server.url(), store, kb, m, efc)
            first = None
            for ef in efs:
                postgres.EF_SEARCH = ef
                found, ms = run(store, kb, data.train, exact=False)
                r = recall(found, truth["train"][0])
                label = f"hnsw m={m} efc={efc} ef={ef}"
                print(f"{label:<30}{f'{seconds:.0f}' if ef == efs[0] else '':>8}"
                      f"{f'{mb:.0f}' if ef == efs[0] else '':>9}{r:>11.3f}{p50_p99(ms):>13}", flush=True)
                if first is None and r >= args.target:
                    first = ef
            if first is not None and chosen is None:
                chosen = (m, efc, first)
                postgres.EF_SEARCH = first
                found, ms = run(store, kb, data.test, exact=False)
                print(f"  chosen on train (cheapest reaching {args.target}): m={m}, ef_construction={efc}, "
                      f"ef_search={first}; TEST recall@10 {recall(found, truth['test'][0]):.3f}, "
                      f"p50/p99 {p50_p99(ms)} ms; exact {p50_p99(truth['test'][1])} ms", flush=True)
        if chosen is None:
            print(f"no setting reached train recall@10 {args.target}")
        store.close()
    finally:
        server.stop()


if __name__ == "__main__":
    main()
