"""Tune the HNSW graph on real MiniLM vectors (SciFact chunks), and compare usearch with faiss.

    nice -n 19 python -m benchmarks.ann_tuning [--source STORE] [--faiss]

Recall@10 is measured against exact search, as the store does it: the graph proposes its
search beam and the candidates are re-scored exactly. Parameters are chosen on the *train*
claims; the chosen row is then reported on the *test* claims. ``--faiss`` adds faiss-cpu's
HNSW (flat float32 storage, inner product) with the same settings, if importable.

2026-11-30 on 6,710 SciFact chunks (a partial build of the SciFact store), noisy timings:
train recall@10 M=16/efC=128 at ef_search 64 0.992, 128 0.999, 512 0.9995 (f16 0.9998, bf16
0.998, i8 0.952); chosen M=16, efC=128, efS=512, f32 on test: usearch 0.996 (59 MB installed
with numkong), faiss-cpu 1.000 (68 MB); build times within noise of each other (1-9 s). usearch
is the one citewise uses: it removes and adds by 64-bit key in place (faiss's HNSW cannot
remove), saves one file, and returns stored vectors by key.
"""

from __future__ import annotations

import argparse
import importlib.util
import time
from pathlib import Path

import numpy as np

from benchmarks.scifact_vectors import exact_top, load_chunks, load_claims, recall_at
from citewise.stores.sqlite_ann import Graph, HNSWParams

GRID = [(8, 64, 32), (16, 64, 32), (16, 64, 64), (16, 128, 64), (16, 128, 128), (32, 128, 128)]
DTYPES = ["f32", "f16", "bf16", "i8"]


def usearch_run(vectors: np.ndarray, queries: np.ndarray, p: HNSWParams) -> tuple[float, list]:
    g = Graph(vectors.shape[1], p)
    t = time.perf_counter()
    g.add(np.arange(len(vectors)), [b""] * len(vectors), vectors, threads=p.threads)
    built = time.perf_counter() - t
    found = []
    for q in queries:
        cand = g.search(q, 10)
        found.append(cand[np.argsort(-(vectors[cand] @ q), kind="stable")][:10])
    return built, found


def faiss_run(vectors: np.ndarray, queries: np.ndarray, p: HNSWParams) -> tuple[float, list]:
    import faiss

    faiss.omp_set_num_threads(2)
    index = faiss.IndexHNSWFlat(vectors.shape[1], p.connectivity, faiss.METRIC_INNER_PRODUCT)
    index.hnsw.efConstruction = p.expansion_add
    index.hnsw.efSearch = p.expansion_search
    t = time.perf_counter()
    index.add(vectors)
    built = time.perf_counter() - t
    faiss.omp_set_num_threads(1)
    _, ids = index.search(queries, max(10, p.expansion_search))
    found = [row[np.argsort(-(vectors[row] @ q), kind="stable")][:10]
             for row, q in zip(ids, queries, strict=True)]
    return built, found


def installed_mb(*folders: str) -> float:
    """Size on disk of installed package folders (``faiss``, ``faiss_cpu.libs``, ...)."""
    spec = importlib.util.find_spec(folders[0])
    if spec is None or not spec.origin:
        return float("nan")
    site = Path(spec.origin).parent.parent
    return sum(f.stat().st_size for name in folders for f in (site / name).rglob("*")
               if f.is_file()) / 1e6


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--source")
    ap.add_argument("--faiss", action="store_true")
    args = ap.parse_args()
    chunks = load_chunks(args.source)
    claims = load_claims()
    train_q, test_q = claims.of("train")[1], claims.of("test")[1]
    truth = {"train": exact_top(chunks.vectors, train_q, 10), "test": exact_top(chunks.vectors, test_q, 10)}
    print(f"{len(chunks.vectors):,} SciFact chunks ({chunks.source}); "
          f"{len(train_q)} train / {len(test_q)} test claims; recall@10 against exact search")
    print(f"{'library':<8} {'dtype':<5} {'M':>3} {'efC':>4} {'efS':>4} {'build s':>8} {'train R@10':>10}")
    for m, efc, efs in GRID:
        p = HNSWParams(m, efc, efs, "f32", threads=2)
        built, found = usearch_run(chunks.vectors, train_q, p)
        print(f"{'usearch':<8} {'f32':<5} {m:>3} {efc:>4} {efs:>4} {built:8.2f} "
              f"{recall_at(found, truth['train']):10.4f}")
    chosen = HNSWParams()
    for dtype in DTYPES:
        p = HNSWParams(chosen.connectivity, chosen.expansion_add, chosen.expansion_search, dtype, 2)
        built, found = usearch_run(chunks.vectors, train_q, p)
        print(f"{'usearch':<8} {dtype:<5} {p.connectivity:>3} {p.expansion_add:>4} {p.expansion_search:>4} "
              f"{built:8.2f} {recall_at(found, truth['train']):10.4f}")
    runs = [("usearch", usearch_run)] + ([("faiss", faiss_run)] if args.faiss else [])
    print(f"\nchosen (citewise default) on test: M={chosen.connectivity} efC={chosen.expansion_add} "
          f"efS={chosen.expansion_search} {chosen.dtype}")
    for name, run in runs:
        built, found = run(chunks.vectors, test_q, HNSWParams(threads=2))
        size = (installed_mb("usearch", "numkong", "numkong.libs") if name == "usearch"
                else installed_mb("faiss", "faiss_cpu.libs"))
        print(f"{name:<8} build {built:6.2f}s  test R@10 {recall_at(found, truth['test']):.4f}  "
              f"installed {size:.0f} MB")


if __name__ == "__main__":
    main()
