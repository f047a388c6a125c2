"""``SQLTablesConformance``: what a ``SQLStore`` keeps in its tables, on each of its dialects:
named migrations applied once, and old databases upgraded with their rows. The upgrade tests
take an ``empty_url`` fixture: the URL of a new, empty database of the backend."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, cast

import pytest

from citewise.errors import AlreadyExistsError
from citewise.kb import KBConfig, KnowledgeBase
from citewise.stores import migrations, open_store
from citewise.stores.database import now
from citewise.stores.job_rows import JobFile
from citewise.stores.roles import Store
from citewise.stores.sql import SQLStore
from citewise.testing.helpers import Conformance, config, document, sentences


@contextmanager
def schema_before(step: str, url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[SQLStore]:
    """A store at ``url`` with only the migrations before ``step`` applied (on its own, this
    version of citewise cannot write such a database: write old rows with ``old_kb``)."""
    with monkeypatch.context() as m:
        for backend, steps in list(migrations.MIGRATIONS.items()):
            m.setitem(migrations.MIGRATIONS, backend, steps[:[n for n, _ in steps].index(step)])
        old = cast(SQLStore, open_store(url))
        try:
            yield old
        finally:
            old.close()


def old_kb(old: SQLStore, name: str) -> KnowledgeBase:
    """A ``kbs`` row as citewise wrote it before m011 (no tenant column)."""
    with old.db.transaction() as cur:
        kb_id = old.db.insert_id(cur, "INSERT INTO kbs (name, config, created_at, version) "
                                      "VALUES (%s, %s, %s, 0)", (name, config().to_json(), now()))
    return KnowledgeBase(kb_id, name, config())


class SQLTablesConformance(Conformance):
    def test_migrations_are_named_and_applied_once(self, store: Store) -> None:
        expected = [name for name, _ in migrations.MIGRATIONS[cast(SQLStore, store).dialect.name]]
        assert expected[:2] == ["m001_initial", "m002_query_log"]
        assert sorted(r[0] for r in self.table(store, "SELECT name FROM migrations")) == expected
        other = self.reopen(store)
        try:
            assert other.migrate() == []
        finally:
            other.close()
        assert cast(SQLStore, store).migrations_applied() == sorted(expected)

    def test_m009_drops_only_the_local_models_sentence_rows(self, store: Store) -> None:
        local = store.create_kb("local", KBConfig(embedder="local:all-MiniLM-L6-v2", dim=8))
        hashing = store.create_kb("hashing", config())
        for kb in (local, hashing):
            doc, chunks, vectors = document("a.md", "one", "two")
            store.put_document(kb, doc, chunks, vectors, sentences(chunks))
        with cast(SQLStore, store).db.transaction() as cur:
            cur.execute("DELETE FROM migrations WHERE name = 'm009_contextual_sentence_vectors'")
        self.reopen(store).close()  # opening applies it
        assert [r[0] for r in self.table(store, "SELECT kb_id FROM chunk_sentences")] == [hashing.id] * 2
        assert self.table(store, "SELECT name FROM migrations "
                                 "WHERE name = 'm009_contextual_sentence_vectors'")

    def test_m010_drops_the_sentence_rows_of_chunks_with_lines(self, store: Store) -> None:
        kb = store.create_kb("kb", config())
        doc, chunks, vectors = document("a.md", "Prose only. Two sentences.", "Steps:\n- one\n- two",
                                        "| a | b |\n| 1 | 2 |")
        store.put_document(kb, doc, chunks, vectors, sentences(chunks))
        with cast(SQLStore, store).db.transaction() as cur:
            cur.execute("DELETE FROM migrations WHERE name = 'm010_structured_units'")
        self.reopen(store).close()  # opening applies it
        assert len(self.table(store, "SELECT kb_id FROM chunk_sentences")) == 1
        assert list(store.sentence_vectors(kb, [c.id for c in chunks])) == [chunks[0].id]

    def test_a_database_from_before_m003_upgrades_and_keeps_its_log(
            self, empty_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
        with schema_before("m003_tenants", empty_url, monkeypatch) as old:
            kb = old_kb(old, "kb")
            with old.db.transaction() as cur:  # a row as the m002 code wrote it
                cur.execute(
                    "INSERT INTO query_log (kb_id, created_at, question, status, embedder, record) "
                    "VALUES (%s, %s, %s, %s, %s, %s)",
                    (kb.id, "2026-01-01T00:00:00+00:00", "before", "answered", "hashing:8",
                     '{"question": "before"}'),
                )
        store = cast(SQLStore, open_store(empty_url))
        try:
            assert store.migrations_applied()[2:4] == ["m003_tenants", "m004_query_log_v2"]
            [row] = store.query_log(store.get_kb("kb"))
            assert (row.question, row.path, row.feedback) == ("before", "", None)
            store.add_feedback(kb, row.id, True)
            assert store.query_log(kb)[0].feedback is True
        finally:
            store.close()

    def test_m011_moves_tenants_knowledge_bases_to_their_column(
            self, empty_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
        with schema_before("m011_kb_tenant_column", empty_url, monkeypatch) as old:
            acme = old.tenants.create_tenant("acme")
            owned, orphan = old_kb(old, f"t{acme.id}.docs"), old_kb(old, f"t{acme.id}.lost")
            plain = old_kb(old, "docs")
            with old.db.transaction() as cur:  # owned as the m003 code owned it
                cur.execute("INSERT INTO kb_owners (kb_id, tenant_id, name) VALUES (%s, %s, %s)",
                            (owned.id, acme.id, "docs"))
            old.put_document(owned, *document("a.md", "the tenant's notes"))
        store = cast(SQLStore, open_store(empty_url))
        try:
            docs = store.get_kb("docs", tenant=acme.id)
            assert (docs.id, docs.tenant_id, store.count_chunks(docs)) == (owned.id, acme.id, 1)
            assert [(k.id, k.name) for k in store.list_kbs()] == [
                (plain.id, "docs"), (orphan.id, orphan.name)]  # never owned: the operator's
            with pytest.raises(AlreadyExistsError):
                store.create_kb("docs", config(), tenant=acme.id)
            assert store.create_kb("new", config(), tenant=acme.id).id > orphan.id
            assert self.table(store, "SELECT count(*) FROM kbs")[0][0] == 4
        finally:
            store.close()

    def test_m013_leaves_a_job_running_before_it_to_be_taken_over(
            self, empty_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
        with schema_before("m013_job_leases", empty_url, monkeypatch) as old:
            job = old.jobs.create_job(4, "docs", [JobFile("a.md", b"a")])
            with old.db.transaction() as cur:  # claimed as the m012 code claimed it
                cur.execute("UPDATE jobs SET runner = 'old', state = 'running'")
        store = cast(SQLStore, open_store(empty_url))
        try:
            assert store.jobs.claimable(operator=False) == [(job.id, 4)]
            assert store.jobs.claim(job.id, "new") and not store.jobs.claim(job.id, "old")
        finally:
            store.close()


def rows(store: Store, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Rows of a ``SQLStore``'s tables, for tests outside the conformance classes."""
    return cast(SQLStore, store).db.rows(sql, params)
