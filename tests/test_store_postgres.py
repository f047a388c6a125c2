"""The PostgreSQL store over real connections: pgvector from the pgserver wheel, and the
machine's Debian PostgreSQL (no pgvector) for the bytea fallback."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterator

import numpy as np
import pytest

from citewise.errors import ConfigError
from citewise.kb import KBConfig
from citewise.records import Chunk, Document, Section
from citewise.stores import open_store
from citewise.stores.postgres import ann_sql, open_postgres
from citewise.stores.sql import SQLStore
from citewise.testing import SQLStoreConformance, config, document
from citewise.testing.sql import rows as sql
from tests.envcheck import need, unavailable
from tests.servers import check_reconnects


class TestPostgresStore(SQLStoreConformance):
    @pytest.fixture
    def store(self, pg_store: SQLStore) -> SQLStore:
        return pg_store

    @pytest.fixture
    def empty_url(self, pg_database) -> Iterator[str]:
        with pg_database() as url:
            yield url


def test_urls_choose_the_postgres_store(pg_database) -> None:
    with pg_database() as url:
        for scheme in ("postgresql", "postgres", "postgresql+psycopg"):
            store = open_store(url.replace("postgresql", scheme, 1))
            assert store.dialect.name == "postgres" and store.dialect.pgvector
            store.close()


def test_vectors_live_in_a_pgvector_column(pg_store: SQLStore) -> None:
    kb = pg_store.create_kb("kb", config())
    doc, chunks, vectors = document("a.md", "one", "two")
    pg_store.put_document(kb, doc, chunks, vectors)
    rows = sql(pg_store, "SELECT vector_dims(vector), (vector <=> %s::vector) FROM chunks "
               "ORDER BY chunk_key", (str(vectors[0].tolist()),))
    assert rows[0][0] == 8 and rows[0][1] == pytest.approx(0.0, abs=1e-6)


@pytest.mark.server
def test_without_pgvector_vectors_fall_back_to_bytea(caplog: pytest.LogCaptureFixture) -> None:
    """The machine's Debian PostgreSQL 15 (127.0.0.1:5432) has no pgvector."""
    import psycopg

    try:
        admin = psycopg.connect("postgresql://postgres@127.0.0.1:5432/postgres", autocommit=True,
                                connect_timeout=5)
    except psycopg.Error as e:
        unavailable(f"the PostgreSQL on 127.0.0.1:5432 ({e})")
    without = not admin.execute("SELECT 1 FROM pg_available_extensions WHERE name = 'vector'").fetchone()
    need(without, "a PostgreSQL without pgvector on 127.0.0.1:5432")
    name = f"cw_{uuid.uuid4().hex[:12]}"
    admin.execute(f"CREATE DATABASE {name}")
    try:
        with caplog.at_level(logging.WARNING):
            store = open_postgres(f"postgresql://postgres@127.0.0.1:5432/{name}")
        assert not store.dialect.pgvector and "pgvector extension is not installed" in caplog.text
        kb = store.create_kb("kb", config())
        doc, chunks, vectors = document("a.md", "nicotine patch", "gum")
        store.put_document(kb, doc, chunks, vectors)
        assert store.dense_index(kb).matrix.tolist() == vectors.tolist()
        store.ann_min_chunks = 1  # no pgvector, no HNSW: dense search stays exact
        assert not store.approximate(kb)
        keys, cosines = store.dense_search(kb, vectors[1], 2)
        want, want_cos = store.dense_index(kb).search(vectors[1], 2)
        assert keys.tolist() == want.tolist() and cosines.tolist() == want_cos.tolist()
        assert len(store.keyword(kb, ["patch"], 5)) == 1
        store.close()
    finally:
        admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        admin.close()


def test_a_dropped_connection_is_opened_again(pg_store: SQLStore, pg_server) -> None:
    import psycopg

    def kill() -> None:
        [(pid,)] = sql(pg_store, "SELECT pg_backend_pid()")
        with psycopg.connect(pg_server.url(), autocommit=True) as admin:
            admin.execute("SELECT pg_terminate_backend(%s)", (pid,))

    check_reconnects(pg_store, kill)


DIM = 32


def _clustered(rng: np.random.Generator, n: int, centres: np.ndarray) -> np.ndarray:
    v = centres[rng.integers(len(centres), size=n)] + 0.35 * rng.normal(size=(n, DIM))
    return (v / np.linalg.norm(v, axis=1, keepdims=True)).astype(np.float32)


def _fill(store: SQLStore, name: str, vectors: np.ndarray, per_doc: int = 500) -> object:
    kb = store.create_kb(name, KBConfig(embedder=f"hashing:{DIM}", dim=DIM))
    for start in range(0, len(vectors), per_doc):
        texts = [f"{name} chunk {i}" for i in range(start, min(start + per_doc, len(vectors)))]
        doc = Document(f"{start}.md", "T", (Section(("P",), tuple(texts)),), f"{start}.md")
        chunks = [Chunk(doc.id, i, ("P",), t, "T") for i, t in enumerate(texts)]
        store.put_document(kb, doc, chunks, vectors[start:start + len(texts)])
    return kb


def test_a_large_kb_is_searched_through_its_own_hnsw_index(pg_database) -> None:
    rng = np.random.default_rng(7)
    centres = rng.normal(size=(40, DIM))
    queries = _clustered(rng, 50, centres)
    with pg_database() as url:
        store = open_store(url + "?ann_min_chunks=200")
        assert store.dialect.name == "postgres" and store.ann_min_chunks == 200
        big = _fill(store, "big", _clustered(rng, 3000, centres))
        # another knowledge base whose chunks are the queries themselves: never a result of big's
        other = _fill(store, "other", np.repeat(queries, 5, axis=0))
        small = _fill(store, "small", _clustered(rng, 100, centres))
        assert store.approximate(big) and store.approximate(other) and not store.approximate(small)
        exact = store.dense_index(big)
        hits = 0
        for q in queries:
            keys, cosines = store.dense_search(big, q, 10)
            want, want_cos = exact.search(q, 10)
            hits += len(set(keys.tolist()) & set(want.tolist()))
            assert set(keys.tolist()) <= set(exact.keys.tolist())
            np.testing.assert_allclose(cosines, exact.take(keys.tolist(), "big") @ q, rtol=0, atol=1e-6)
            assert list(cosines) == sorted(cosines, reverse=True)
            assert keys[0] == want[0] and cosines[0] == pytest.approx(want_cos[0], abs=1e-6)
        assert hits / (10 * len(queries)) >= 0.98
        theirs, _ = store.dense_search(other, queries[0], 5)
        assert set(theirs.tolist()) <= set(store.dense_index(other).keys.tolist())
        names = {r[0] for r in sql(store, "SELECT indexname FROM pg_indexes WHERE tablename = 'chunks'")}
        assert {f"chunks_hnsw_{big.id}_{DIM}", f"chunks_hnsw_{other.id}_{DIM}"} <= names
        assert not any(n.startswith(f"chunks_hnsw_{small.id}_") for n in names)
        literal = str(queries[0].tolist())
        plan = "\n".join(r[0] for r in sql(store, "EXPLAIN " + ann_sql(big), (literal, 10)))
        assert f"chunks_hnsw_{big.id}_{DIM}" in plan, plan
        # the index yields at most hnsw.ef_search rows (pgvector's default 40 in a bare
        # session); dense_search sets it in its own transaction, so 100 come back
        assert len(sql(store, ann_sql(big), (literal, 100))) == 40
        assert len(store.dense_search(big, queries[0], 100)[0]) == 100
        small_keys, _ = store.dense_search(small, queries[0], 5)
        assert small_keys.tolist() == store.dense_index(small).search(queries[0], 5)[0].tolist()
        store.delete_kb("big")
        names = {r[0] for r in sql(store, "SELECT indexname FROM pg_indexes WHERE tablename = 'chunks'")}
        assert f"chunks_hnsw_{big.id}_{DIM}" not in names and f"chunks_hnsw_{other.id}_{DIM}" in names
        store.close()


def test_two_workers_building_one_index_at_once_both_succeed(pg_database) -> None:
    from concurrent.futures import ThreadPoolExecutor

    rng = np.random.default_rng(5)
    with pg_database() as url:
        workers = [open_postgres(url, ann_min_chunks=50) for _ in range(2)]
        kb = _fill(workers[0], "kb", _clustered(rng, 300, rng.normal(size=(4, DIM))))
        query = np.eye(DIM, dtype=np.float32)[0]
        with ThreadPoolExecutor(2) as pool:
            results = list(pool.map(lambda w: w.dense_search(kb, query, 5)[0].tolist(), workers))
        assert results[0] == results[1] and len(results[0]) == 5
        for w in workers:
            w.close()


def test_switching_embedder_drops_the_index_of_the_old_dimension(pg_database) -> None:
    rng = np.random.default_rng(3)
    with pg_database() as url:
        store = open_postgres(url, ann_min_chunks=50)
        kb = _fill(store, "kb", _clustered(rng, 60, rng.normal(size=(4, DIM))))
        store.dense_search(kb, np.eye(DIM, dtype=np.float32)[0], 3)
        index = store.dense_index(kb)
        keys = [int(k) for k in index.keys]
        ids = [c.id for c in (store.chunks(kb, keys)[k] for k in keys)]
        new = rng.normal(size=(len(keys), 16)).astype(np.float32)
        new /= np.linalg.norm(new, axis=1, keepdims=True)
        store.put_shadow_vectors(kb, "hashing:16", keys, ids, new)
        switched = store.switch_vectors(kb, KBConfig(embedder="hashing:16", dim=16))
        found, cosines = store.dense_search(switched, new[0], 1)
        assert found.tolist() == [keys[0]] and cosines[0] == pytest.approx(1.0, abs=1e-5)
        names = {r[0] for r in sql(store, "SELECT indexname FROM pg_indexes WHERE tablename = 'chunks'")}
        assert f"chunks_hnsw_{kb.id}_16" in names and f"chunks_hnsw_{kb.id}_{DIM}" not in names
        store.close()


def test_ann_min_chunks_must_be_a_number(pg_database) -> None:
    with pg_database() as url, pytest.raises(ConfigError, match="ann_min_chunks"):
        open_postgres(url + "?ann_min_chunks=many")
