"""The PostgreSQL store over real connections: pgvector from the pgserver wheel, and the
machine's Debian PostgreSQL (no pgvector) for the bytea fallback."""

from __future__ import annotations

import logging
import uuid

import pytest

from citewise.stores import open_store
from citewise.stores.postgres import PostgresStore
from tests.servers import check_reconnects
from tests.store_conformance import QueryLogConformance, StoreConformance, config, document, sql


class TestPostgresStore(StoreConformance, QueryLogConformance):
    @pytest.fixture
    def store(self, pg_store: PostgresStore) -> PostgresStore:
        return pg_store


def test_urls_choose_the_postgres_store(pg_database) -> None:
    with pg_database() as url:
        for scheme in ("postgresql", "postgres", "postgresql+psycopg"):
            store = open_store(url.replace("postgresql", scheme, 1))
            assert isinstance(store, PostgresStore) and store.pgvector
            store.close()


def test_vectors_live_in_a_pgvector_column(pg_store: PostgresStore) -> None:
    kb = pg_store.create_kb("kb", config())
    doc, chunks, vectors = document("a.md", "one", "two")
    pg_store.put_document(kb, doc, chunks, vectors)
    rows = sql(pg_store, "SELECT vector_dims(vector), (vector <=> %s::vector) FROM chunks "
               "ORDER BY chunk_key", (str(vectors[0].tolist()),))
    assert rows[0][0] == 8 and rows[0][1] == pytest.approx(0.0, abs=1e-6)


def test_without_pgvector_vectors_fall_back_to_bytea(caplog: pytest.LogCaptureFixture) -> None:
    """The machine's Debian PostgreSQL 15 (127.0.0.1:5432) has no pgvector."""
    import psycopg

    try:
        admin = psycopg.connect("postgresql://postgres@127.0.0.1:5432/postgres", autocommit=True,
                                connect_timeout=5)
    except psycopg.Error:
        pytest.skip("no PostgreSQL on 127.0.0.1:5432")
    if admin.execute("SELECT 1 FROM pg_available_extensions WHERE name = 'vector'").fetchone():
        pytest.skip("this PostgreSQL has pgvector")
    name = f"cw_{uuid.uuid4().hex[:12]}"
    admin.execute(f"CREATE DATABASE {name}")
    try:
        with caplog.at_level(logging.WARNING):
            store = PostgresStore(f"postgresql://postgres@127.0.0.1:5432/{name}")
        assert not store.pgvector and "pgvector extension is not installed" in caplog.text
        kb = store.create_kb("kb", config())
        doc, chunks, vectors = document("a.md", "nicotine patch", "gum")
        store.put_document(kb, doc, chunks, vectors)
        assert store.dense_index(kb).matrix.tolist() == vectors.tolist()
        assert len(store.keyword(kb, ["patch"], 5)) == 1
        store.close()
    finally:
        admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        admin.close()


def test_a_dropped_connection_is_opened_again(pg_store: PostgresStore, pg_server) -> None:
    import psycopg

    def kill() -> None:
        [(pid,)] = sql(pg_store, "SELECT pg_backend_pid()")
        with psycopg.connect(pg_server.url(), autocommit=True) as admin:
            admin.execute("SELECT pg_terminate_backend(%s)", (pid,))

    check_reconnects(pg_store, kill)
