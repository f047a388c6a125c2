"""Keyword search on large knowledge bases: common words pruned (citewise/search/keywords.py) or not.
Pruning is for the database's full-text search, so every store here is opened with
``keyword_index_max_chunks=0`` (SQLite FTS5; the in-memory index never prunes).

    python -m benchmarks.keyword_pruning quality [--grid] [--store PATH]
    python -m benchmarks.keyword_pruning bm25-grid
    python -m benchmarks.keyword_pruning latency STORE.db [STORE.db ...] [--queries 200]

``quality``: SciFact (``.bench/scifact-default.db``, built by ``benchmarks/scifact.py``) is
only 5,183 abstracts, below ``keyword_min_chunks``, so the share rules are applied with the
size minimum off. With ``--grid``, every (rare share, drop share) pair of the grid is scored
on the 809 *train* claims (bm25 and hybrid nDCG@10) and the chosen pair is the one that
ranks fewest chunks (lowest shares) while staying within 0.002 of the unpruned scores on
train; then the unpruned search and citewise's defaults are scored on the 300 *test* claims.

``bm25-grid``: the same grid for BM25 alone on a store of the whole abstracts (one chunk
each, no embedder, so it builds in a minute), and the defaults on test.

``latency``: single keyword searches (``retrieval.keyword_search``, what ``retrieve`` runs)
of SciFact test claims on scale stores built by ``benchmarks/scale.py`` (searched in a copy),
unpruned and pruned in turn for each question, p50/p99 ms; "first" is the pruned search the
first time each question is asked on a fresh store object (its word counts not yet cached);
top-10/top-50 agreement is the share of the unpruned top k the pruned search also returns.

2026-11-30, 2 cores shared with other jobs (load average 8-16, so absolute times are several
times what an idle machine gives; compare within a row).

BM25 nDCG@10, ``bm25-grid`` code path (run as a script of the same calls; unpruned 0.6994 on
train, 0.6844 on test, the 0.684 of ``benchmarks/scifact.py``):

  train, rare share  drop 1.0  drop 0.5  drop 0.3  drop 0.2
               0.10    0.6994    0.6994    0.6991    0.6986
               0.05    0.6994    0.6994    0.6991    0.6982
               0.03    0.6972    0.6972    0.6969    0.6956
               0.02    0.6939    0.6939    0.6936    0.6935
  test: unpruned 0.6844, defaults (rare 0.05, drop 0.3, size minimum off) 0.6847

Rare share 0.05 is the lowest within 0.002 of unpruned on train (0.03 is 0.0022 below); drop
share 0.3 the lowest within 0.0005 of no dropping at that rare share (0.2 costs 0.0012 and
agreed on 0.894 of the top 10 at 200,000 chunks, against 0.977). Hybrid on the chunked store
(``quality``) was not run: ``.bench/scifact-default.db`` was still being built.

``latency`` (defaults; kw-prof is 200,000 perturbed SciFact abstracts written straight into
FTS5 for profiling, the scale stores are ``benchmarks/scale.py``'s):

  store            chunks     unpruned        pruned    speed-up  top-10 agree  load
  scale-50000      50,000   79.3/225.4     31.1/98.8   2.5x       0.987         9.4
  scale-50000      50,000  1672.8/9229  682.5/3668    2.5x       0.987         15.6
  kw-prof         200,000  596.3/1694   184.7/553     3.2x       0.977         8.4

Where FTS5 spends the time (kw-prof, 200,000 chunks, p50 ms, one run at load 7): the OR
query with ``bm25()`` 391; the same matches counted without ranking 49; the knowledge base's
own token alone 19. So ranking, not the posting-list merge, is most of it: ``bm25()`` reads
each matched row's column sizes and position lists, and scans every phrase's whole posting
list (the knowledge base token's included) once per query for its IDF. Restricting the rows
ranked is what helps: dropping the common words outright (66 ms) loses up to 0.03 nDCG@10;
filtering the OR with ``+rowid IN (rare-word matches)`` still walks every match (184 ms);
the form used, ``kb AND (rare) AND (common, common, rare)``, ranks only the rare-word matches
with unchanged scores (135 ms with drop share 0.3, against 451 unpruned in that run).
"""

from __future__ import annotations

import argparse
import os
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

from benchmarks.benchcache import KB_NAME, cache_path, p50_p99, pruning_rows, shared_data, sqlite_copy
from citewise.calibrate import evaluation
from citewise.embedders import DEFAULT_EMBEDDER
from citewise.kb import Retrieval
from citewise.search.retrieval import keyword_search
from citewise.stores.sqlite import open_sqlite

ROOT = Path(__file__).resolve().parent.parent

OFF = 10**12  # keyword_min_chunks that no knowledge base reaches: the unpruned search
RARE = (0.1, 0.05, 0.03, 0.02)
DROP = (1.0, 0.5, 0.3, 0.2)
MODES = ("bm25", "hybrid")


def load(split: str):
    from benchmarks.scifact import load as load_split

    return load_split(shared_data("scifact"), split)


def scores(engine, kb, queries, vectors, s: Retrieval) -> dict[str, float]:
    r = evaluation.evaluate(engine, kb, queries, MODES, settings=s, vectors=vectors)
    return {m: r.means[m]["ndcg@10"] for m in MODES}


def quality(grid: bool, path: Path | None) -> None:
    from citewise.embedders import get_embedder
    from citewise.engine import Engine

    path = path or cache_path("scifact", DEFAULT_EMBEDDER, "sections", True)
    if not path.exists():
        raise SystemExit(f"{path} not found: build it with python -m benchmarks.scifact")
    store = open_sqlite(path, keyword_index_max_chunks=0)
    engine, kb = Engine(store), store.get_kb(KB_NAME)
    model = get_embedder(kb.config.embedder)
    base = kb.config.retrieval
    off = replace(base, keyword_min_chunks=OFF)
    default = Retrieval()
    print(f"SciFact {path.name}: {store.count_chunks(kb):,} chunks; load average "
          f"{os.getloadavg()[0]:.1f}")
    if grid:
        train = load("train")
        tv = model.embed([q.query for q in train])
        ref = scores(engine, kb, train, tv, off)
        print(f"\ntrain, {len(train)} claims, nDCG@10 (size minimum off)")
        print(f"{'rare share':>10} {'drop share':>10} {'bm25':>7} {'hybrid':>7}")
        print(f"{'unpruned':>21} {ref['bm25']:7.4f} {ref['hybrid']:7.4f}")
        ok = []
        for rare in RARE:
            for drop in DROP:
                s = replace(base, keyword_min_chunks=0, keyword_rare_share=rare, keyword_drop_share=drop)
                got = scores(engine, kb, train, tv, s)
                within = all(got[m] >= ref[m] - 0.002 for m in MODES)
                ok += [(rare, drop)] if within else []
                print(f"{rare:10.2f} {drop:10.2f} {got['bm25']:7.4f} {got['hybrid']:7.4f}"
                      f"{'' if within else '  (more than 0.002 below)'}", flush=True)
        best = min(ok, default=None)
        print(f"chosen (lowest shares within 0.002 on train): rare {best[0]}, drop {best[1]}; "
              f"citewise default: rare {default.keyword_rare_share}, drop "
              f"{default.keyword_drop_share}" if best else "no pair within 0.002")
    test = load("test")
    vectors = model.embed([q.query for q in test])
    ref = scores(engine, kb, test, vectors, off)
    got = scores(engine, kb, test, vectors, replace(base, keyword_min_chunks=0))
    print(f"\ntest, {len(test)} claims, nDCG@10      {'bm25':>7} {'hybrid':>7}")
    print(f"{'unpruned':<32} {ref['bm25']:7.4f} {ref['hybrid']:7.4f}")
    print(f"{'pruned (defaults, size minimum off)':<32} {got['bm25']:7.4f} {got['hybrid']:7.4f}")
    print(f"{'change':<32} {got['bm25'] - ref['bm25']:+7.4f} {got['hybrid'] - ref['hybrid']:+7.4f}")


def bm25_grid() -> None:
    """BM25 alone on a store of whole SciFact abstracts (one chunk each, no embedder: built in
    a minute): the share grid on train, the unpruned search and the defaults on test."""
    import json
    import tempfile

    from citewise.kb import KBConfig
    from citewise.records import Chunk, Document, Section

    rows = [json.loads(line) for line in (shared_data("scifact") / "corpus.jsonl").open()]
    with tempfile.TemporaryDirectory() as tmp:
        store = open_sqlite(Path(tmp) / "abstracts.db", keyword_index_max_chunks=0)
        kb = store.create_kb("abstracts", KBConfig(embedder="none", dim=1))
        one = np.ones((1, 1), np.float32)
        for r in rows:
            doc = Document(r["_id"], r["title"], (Section(("Abstract",), (r["text"],)),), r["_id"])
            store.put_document(kb, doc, [Chunk(r["_id"], 0, ("Abstract",), r["text"], r["title"])], one)

        def ndcg(queries, s: Retrieval) -> float:
            total = 0.0
            for q in queries:
                hits = keyword_search(store, kb, q.query, s)
                chunks = store.chunks(kb, [k for k, _ in hits])
                total += evaluation.score([chunks[k].doc_id for k, _ in hits], q.relevant)["ndcg@10"]
            return total / len(queries)

        print(f"BM25 nDCG@10 on {len(rows):,} whole abstracts; load average {os.getloadavg()[0]:.1f}")
        train, test = load("train"), load("test")
        print(f"train ({len(train)} claims), unpruned: {ndcg(train, Retrieval(keyword_min_chunks=OFF)):.4f}")
        print(f"{'rare share':>10} " + " ".join(f"{f'drop {d}':>9}" for d in DROP))
        for rare in RARE:
            cells = [ndcg(train, Retrieval(keyword_min_chunks=0, keyword_rare_share=rare,
                                           keyword_drop_share=drop)) for drop in DROP]
            print(f"{rare:>10} " + " ".join(f"{c:9.4f}" for c in cells), flush=True)
        d = Retrieval()
        print(f"test ({len(test)} claims): unpruned {ndcg(test, Retrieval(keyword_min_chunks=OFF)):.4f}, "
              f"defaults (rare {d.keyword_rare_share}, drop {d.keyword_drop_share}, size minimum "
              f"off) {ndcg(test, replace(d, keyword_min_chunks=0)):.4f}")
        store.close()


def latency(paths: list[Path], queries: int, on: Retrieval) -> None:
    from benchmarks.scifact_vectors import load_claims

    texts = load_claims().of("test")[0][:queries]
    off = Retrieval(keyword_min_chunks=OFF)
    print(f"{len(texts)} SciFact test claims; keyword search p50/p99 ms; load average "
          f"{os.getloadavg()[0]:.1f}")
    print(f"{'store':<22} {'chunks':>10} {'unpruned':>13} {'pruned':>13} {'first':>13} "
          f"{'speed-up p50':>12} {'top-10 agree':>12} {'top-50 agree':>12}")
    for path in paths:
        with sqlite_copy(path, keyword_index_max_chunks=0) as store:  # the originals stay untouched
            kb = max(store.list_kbs(), key=store.count_chunks)  # the largest in the file
            first = []
            for text in texts:
                t = time.perf_counter()
                keyword_search(store, kb, text, on)
                first.append((time.perf_counter() - t) * 1000)
            before, after, agree = pruning_rows(store, kb, texts, off, on, (10, 50))
            print(f"{path.name:<22} {store.count_chunks(kb):>10,} {p50_p99(before):>13} "
                  f"{p50_p99(after):>13} {p50_p99(first):>13} "
                  f"{np.percentile(before, 50) / np.percentile(after, 50):>11.1f}x "
                  f"{agree[10]:>12.3f} {agree[50]:>12.3f}", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="part", required=True)
    q = sub.add_parser("quality")
    q.add_argument("--grid", action="store_true", help="score the share grid on train first")
    q.add_argument("--store", type=Path, help="a built SciFact store (default: the .bench cache)")
    sub.add_parser("bm25-grid")
    lat = sub.add_parser("latency")
    lat.add_argument("stores", nargs="+", type=Path)
    lat.add_argument("--queries", type=int, default=200)
    lat.add_argument("--rare", type=float, default=Retrieval.keyword_rare_share)
    lat.add_argument("--drop", type=float, default=Retrieval.keyword_drop_share)
    args = ap.parse_args()
    if args.part == "quality":
        quality(args.grid, args.store)
    elif args.part == "bm25-grid":
        bm25_grid()
    else:
        on = Retrieval(keyword_rare_share=args.rare, keyword_drop_share=args.drop)
        print(f"pruned: keyword_rare_share {on.keyword_rare_share}, keyword_drop_share "
              f"{on.keyword_drop_share}, keyword_min_chunks {on.keyword_min_chunks:,}")
        latency(args.stores, args.queries, on.validate())


if __name__ == "__main__":
    main()
