"""Store backends side by side: ingest throughput and search latency.

    python -m benchmarks.stores [--backends sqlite,mysql,postgres] [--tenants 2000]
                                [--keywords memory|database]

For each backend, in a fresh database: ingest one knowledge base each of 500, 5,000 and 50,000
chunks and 2,000 knowledge bases of 200 chunks, from precomputed 384-dimensional vectors (the
embedder is excluded: it is the ingest bottleneck and the same for every store), in documents
of 50 chunks, one transaction each. Then time ``retrieve`` for one question (dense top-50 by
exact cosine, keyword top-50, RRF, MMR to 8: what ``ask`` runs before the gate) with a random
query vector and three to five words drawn as the chunks' words are (``tests/tenants.py``);
p50 and p99 over ``--queries`` questions, after one cold first question per knowledge base.
The tenant row asks each question of a random knowledge base among the 2,000, so most
questions find a cold vector cache.
SQLite is the baseline. MySQL is the machine's MariaDB (``--mysql-url``); PostgreSQL is the
pgserver wheel's PostgreSQL 16 with pgvector, started on a free port, or ``--postgres-url``.
Target: p50 at or under 20 ms at 50,000 chunks on every backend.

``--keywords memory`` (the default, what a store does below ``keyword_index_max_chunks``):
keyword search is BM25 over the in-memory index each process keeps per knowledge base
(``citewise/stores/keyword_index.py``); the first search of a size, on a store opened afresh,
includes building it and the dense matrix from the store, and each size also gets keyword
search alone and the index's size. ``--keywords database``: every store's full-text search
(``?keyword_index_max_chunks=0`` on the URL), and from ``keyword_min_chunks`` (20,000) chunks
a size also gets, in the same run: ``retrieve`` with keyword pruning off (every question word,
``citewise/search/keywords.py``), keyword search alone unpruned and pruned (each question both ways
in turn, word counts cached as in a serving process), and the share of the unpruned keyword
top 10 the pruned search returns. ``--tenants 0`` skips the tenant row.

2026-12-01, ``--sizes 50000 --tenants 0``, in-memory keyword index, idle machine (load average
0.93 before, 1.07 after; the process spent 49.6 s of CPU):

  ms unless stated                            sqlite           mysql        postgres
  50,000 chunks: first search (cold)          5413.4          6217.2          5113.0
  50,000 chunks: p50 / p99                 5.5 / 6.9       4.9 / 7.7       6.1 / 7.2
  50,000 chunks: keyword alone             0.3 / 0.6       0.6 / 0.9       0.6 / 0.9
  50,000 chunks: keyword index, MB             100.1           100.1           100.1

2026-12-03, the same command at 81307cc, idle, on a machine ~2.2x slower (its reference: a
Python loop of 1M additions in 70 ms; load average 2.41 before, falling from the previous run,
1.32 after; 98.8 s of CPU):

  ms unless stated                            sqlite           mysql        postgres
  50,000 chunks: first search (cold)          9633.7         11382.2         10091.7
  50,000 chunks: p50 / p99                9.6 / 12.0     11.0 / 15.7     11.1 / 13.1
  50,000 chunks: keyword alone             0.6 / 0.8       1.1 / 1.5       1.1 / 1.5
  50,000 chunks: keyword index, MB              98.9            98.9            98.9

2026-12-03 later, the same command at 3841f43, idle, on a faster host (reference loop 29 ms;
load average 0.55 before, 1.02 after; 54.3 s of CPU): p50 / p99 sqlite 6.8 / 7.8, mysql
6.8 / 9.2, postgres 7.0 / 8.3 ms; keyword alone 0.3-0.7 ms; first search 5.5-6.6 s.

The first search builds the dense matrix and the keyword index (chunk records and the gate's
stems included) from one read of the store; SciFact's nDCG@10 with the index is within 0.001
of FTS5's (``python -m benchmarks.scifact --keyword-parity``).

2026-11-30, ``--sizes 50000 --tenants 0``, before the in-memory index (so the database's
full-text search, as ``--keywords database`` now), load average 10-16 (other jobs; timings
noisy, compare within a column):

  ms unless stated                                    sqlite           mysql        postgres
  50,000 chunks: p50 / p99                     188.9 / 436.4  671.2 / 1784.6   275.8 / 522.8
  50,000 chunks: p50 / p99, keyword unpruned   269.2 / 477.1  609.5 / 1703.7   293.0 / 700.5
  50,000 chunks: keyword alone, unpruned        80.6 / 193.2  285.5 / 1130.5   121.5 / 420.0
  50,000 chunks: keyword alone, pruned          62.9 / 132.1    82.6 / 411.1    71.6 / 212.4
  50,000 chunks: pruned top-10 agreement               1.000           1.000           0.778

The synthetic words are Zipf-distributed with the commonest in ~11% of chunks, so most
question words stay below the 5% share and SQLite gains little; MySQL's InnoDB ranking gains
3.5x. PostgreSQL's ``ts_rank_cd`` has no IDF, so a chunk holding only common words can rank in
its unpruned top 10; pruning removes those.
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np

from benchmarks.benchcache import host, p50_p99, pruning_rows
from citewise.kb import KBConfig, Retrieval
from citewise.search.retrieval import keyword_search, retrieve
from citewise.stores import open_store
from citewise.stores.roles import Store
from tests.tenants import fill, tenant_docs, zipf_words

ROOT = Path(__file__).resolve().parent.parent

DIM = 384
EMBEDDER = f"bench:{DIM}"


@contextmanager
def database(backend: str, args: argparse.Namespace) -> Iterator[str]:
    """A fresh, empty database for one backend; dropped afterwards."""
    name = f"cw_bench_{uuid.uuid4().hex[:8]}"
    if backend == "sqlite":
        with tempfile.TemporaryDirectory() as tmp:
            yield f"sqlite:///{tmp}/bench.db"
    elif backend == "mysql":
        import pymysql

        from citewise.stores.urls import ServerURL

        base, t = args.mysql_url.rsplit("/", 1)[0], ServerURL.parse(args.mysql_url)
        admin = pymysql.connect(host=t.host, port=t.port or 3306, user=t.user or "root",
                                password=t.password, autocommit=True)
        admin.cursor().execute(f"CREATE DATABASE {name} CHARACTER SET utf8mb4")
        try:
            yield f"{base}/{name}"
        finally:
            admin.cursor().execute(f"DROP DATABASE {name}")
            admin.close()
    else:
        import psycopg

        server = None
        url = args.postgres_url
        if not url:
            from citewise.testing.pgserver import start_pgvector

            server = start_pgvector()
            url = server.url()
        try:
            with psycopg.connect(url, autocommit=True) as admin:
                admin.execute(f"CREATE DATABASE {name}")
            yield url.rsplit("/", 1)[0] + "/" + name
            with psycopg.connect(url, autocommit=True) as admin:
                admin.execute(f"DROP DATABASE {name} WITH (FORCE)")
        finally:
            if server:
                server.stop()


def ingest_one(store: Store, name: str, chunks: int) -> tuple[object, float]:
    """One knowledge base of ``chunks`` chunks; returns it and the seconds the writes took."""
    kb = store.create_kb(name, KBConfig(embedder=EMBEDDER, dim=DIM))
    docs = list(tenant_docs(10_000 + chunks, chunks, DIM, per_doc=50))
    started = time.perf_counter()
    for doc, rows, vectors in docs:
        store.put_document(kb, doc, rows, vectors)
    return kb, time.perf_counter() - started


WHERE = {"memory": "the in-memory BM25 index", "database": "the database's full-text index"}
UNPRUNED = Retrieval(keyword_min_chunks=10**12)  # every word of the question, at any size


def latencies(store: Store, pick: Callable[[], object], queries: int, rng: random.Random,
              settings: Retrieval | None = None) -> np.ndarray:
    qrng = np.random.default_rng(rng.randrange(2**32))
    times = []
    for _ in range(queries):
        kb = pick()
        q = qrng.standard_normal(DIM).astype(np.float32)
        q /= np.linalg.norm(q)
        question = " ".join(zipf_words(qrng, rng.randint(3, 5)))
        started = time.perf_counter()
        retrieve(store, kb, q, question, settings)
        times.append((time.perf_counter() - started) * 1000)
    return np.asarray(times)


def keyword_latencies(store: Store, kb: object, queries: int, rng: random.Random
                      ) -> tuple[np.ndarray, np.ndarray, float]:
    """Keyword search alone, each question unpruned then pruned (citewise's defaults); and
    the share of the unpruned top 10 the pruned search also returns. Each question is asked
    once pruned beforehand, so its word counts are cached as they are in a serving process."""
    qrng = np.random.default_rng(rng.randrange(2**32))
    questions = [" ".join(zipf_words(qrng, rng.randint(3, 5))) for _ in range(queries)]
    pruned = Retrieval()
    for question in questions:
        keyword_search(store, kb, question, pruned)
    before, after, agree = pruning_rows(store, kb, questions, UNPRUNED, pruned)
    return before, after, agree[10]


def keyword_alone(store: Store, kb: object, queries: int, rng: random.Random) -> np.ndarray:
    """Keyword search alone (the planned words, as ``retrieve`` asks them)."""
    qrng = np.random.default_rng(rng.randrange(2**32))
    times = []
    for _ in range(queries):
        question = " ".join(zipf_words(qrng, rng.randint(3, 5)))
        started = time.perf_counter()
        keyword_search(store, kb, question, Retrieval())
        times.append((time.perf_counter() - started) * 1000)
    return np.asarray(times)


def first_search(url: str, kb: object, rng: random.Random) -> float:
    """The first search of ``kb`` in a process: on a store opened afresh (a cache of its own),
    so it reads the dense matrix (and builds the keyword index) from the store."""
    fresh = open_store(url)
    try:
        return float(latencies(fresh, lambda: kb, 1, rng)[0])
    finally:
        fresh.close()


def bench(backend: str, args: argparse.Namespace) -> dict[str, str]:
    rng = random.Random(args.seed)
    out: dict[str, str] = {}
    in_memory = args.keywords == "memory"
    with database(backend, args) as base:
        url = base if in_memory else f"{base}{'&' if '?' in base else '?'}keyword_index_max_chunks=0"
        store = open_store(url)
        try:
            written = seconds = 0.0
            kbs = {}
            for size in args.sizes:
                kbs[size], took = ingest_one(store, f"single{size}", size)
                written, seconds = written + size, seconds + took
                log(f"{backend}: {size:,} chunks in {took:.1f} s")
            out["ingest, chunks/s (one kb)"] = f"{written / seconds:,.0f}"
            started = time.perf_counter()
            tenants = fill(store, args.tenants, args.tenant_chunks, DIM, EMBEDDER)
            took = time.perf_counter() - started
            log(f"{backend}: {args.tenants:,} x {args.tenant_chunks} chunks in {took:.1f} s")
            out[f"ingest, chunks/s ({args.tenants:,} kbs)"] = \
                f"{args.tenants * args.tenant_chunks / took:,.0f}"
            for size, kb in kbs.items():
                cold = first_search(url, kb, rng)
                store.prepare(kb)  # type: ignore[arg-type]  # this store's own cache, warmed
                warm = latencies(store, lambda kb=kb: kb, args.queries, rng)
                out[f"{size:,} chunks: first search (cold)"] = f"{cold:.1f}"
                out[f"{size:,} chunks: p50 / p99"] = cell(warm)
                if in_memory:
                    out[f"{size:,} chunks: keyword alone"] = \
                        cell(keyword_alone(store, kb, args.queries, rng))
                    index = store.keyword_index(kb)  # type: ignore[attr-defined]
                    out[f"{size:,} chunks: keyword index, MB"] = f"{index.nbytes / 2**20:.1f}"
                elif size >= Retrieval().keyword_min_chunks:
                    out[f"{size:,} chunks: p50 / p99, keyword unpruned"] = \
                        cell(latencies(store, lambda kb=kb: kb, args.queries, rng, UNPRUNED))
                    before, after, agree = keyword_latencies(store, kb, args.queries, rng)
                    out[f"{size:,} chunks: keyword alone, unpruned"] = cell(before)
                    out[f"{size:,} chunks: keyword alone, pruned"] = cell(after)
                    out[f"{size:,} chunks: pruned top-10 agreement"] = f"{agree:.3f}"
            if tenants:
                picked = latencies(store, lambda: rng.choice(tenants), args.queries, rng)
                out[f"random kb of {args.tenants:,}: p50 / p99"] = cell(picked)
        finally:
            store.close()
    return out


def cell(ms: np.ndarray) -> str:
    return p50_p99(ms, " / ")


def log(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backends", default="sqlite,mysql,postgres",
                        help="comma-separated stores to measure (default: all three)")
    parser.add_argument("--sizes", default="500,5000,50000",
                        type=lambda s: [int(x) for x in s.split(",")],
                        help="chunks in the one-knowledge-base rows, comma-separated")
    parser.add_argument("--tenants", type=int, default=2000,
                        help="knowledge bases in the tenant row (0 skips it)")
    parser.add_argument("--tenant-chunks", type=int, default=200,
                        help="chunks in each knowledge base of the tenant row")
    parser.add_argument("--queries", type=int, default=200, help="questions timed per row")
    parser.add_argument("--seed", type=int, default=5, help="seed of the synthetic chunks")
    parser.add_argument("--mysql-url", default="mysql://root@127.0.0.1:3306/test",
                        help="the MySQL/MariaDB server to measure")
    parser.add_argument("--postgres-url", default="",
                        help="a PostgreSQL server with pgvector (default: pgserver's, started here)")
    parser.add_argument("--keywords", choices=["memory", "database"], default="memory",
                        help="keyword search from the in-memory BM25 index (default) or from "
                        "the database's full-text index")
    args = parser.parse_args()
    backends = args.backends.split(",")
    load_before, cpu = os.getloadavg(), time.process_time()
    results = {}
    for b in backends:
        results[b] = bench(b, args)
        log(f"{b}: {results[b]}")
    rows = list(results[backends[0]])
    width = max(len(r) for r in rows)
    print(f"{'ms unless stated':<{width}}  " + "  ".join(f"{b:>14}" for b in backends))
    for row in rows:
        print(f"{row:<{width}}  " + "  ".join(f"{results[b][row]:>14}" for b in backends))
    print(f"\n{DIM}-dim vectors; retrieve() = dense top-50 + keyword top-50 + RRF + MMR to 8; "
          f"keyword search from {WHERE[args.keywords]}; {args.queries} questions per row")
    print(f"load average {load_before[0]:.2f} before, {os.getloadavg()[0]:.2f} after on "
          f"{os.cpu_count()} cores; this process spent {time.process_time() - cpu:.1f} s of CPU "
          "(the database servers' CPU is theirs)")
    print(host())


if __name__ == "__main__":
    main()
