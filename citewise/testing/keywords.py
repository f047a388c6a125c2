"""``KeywordIndexConformance``: keyword search from the in-memory BM25 index every store keeps
per knowledge base (``stores/keyword_index.py``), and the database's full-text search above
``keyword_index_max_chunks``."""

from __future__ import annotations

from typing import cast

from citewise.stores import open_store
from citewise.stores.roles import Store
from citewise.stores.sql import SQLStore
from citewise.testing.helpers import Conformance, config, document


def with_option(store: Store, option: str) -> Store:
    """A second store on the same database, with ``option`` (``name=value``) on its URL."""
    url = store.url.replace(":***@", "@")
    return open_store(f"{url}{'&' if '?' in url else '?'}{option}")


class KeywordIndexConformance(Conformance):
    def test_keyword_index_follows_another_workers_writes(self, store: Store) -> None:
        kb = store.create_kb("kb", config())
        store.put_document(kb, *document("a.md", "varenicline nausea", "bupropion seizures"))
        other = self.reopen(store)
        try:
            seen = other.get_kb("kb")
            assert other.keyword_in_memory(seen)
            assert other.keyword(seen, ["zephyrine"], 10) == []  # builds and keeps the index
            assert len(other.keyword(seen, ["nausea"], 10)) == 1
            store.put_document(kb, *document("b.md", "zephyrine titration protocol"))
            hits = other.keyword(seen, ["zephyrine"], 10)
            assert [other.chunks(seen, [hits[0][0]])[hits[0][0]].doc_id] == ["b.md"]
            store.delete_document(kb, "a.md")
            assert other.keyword(seen, ["nausea", "seizures"], 10) == []
            assert len(other.keyword(seen, ["zephyrine", "protocol"], 10)) == 1
            kinds = {s.kind: s for s in other.cache.stats()}
            assert kinds["keyword"].misses == 3 and kinds["keyword"].hits >= 1
        finally:
            other.close()

    def test_keyword_statistics_are_the_knowledge_base_own(self, store: Store) -> None:
        a = store.create_kb("tenant-a", config())
        b = store.create_kb("tenant-b", config())
        store.put_document(b, *document("b.md", "cells ferritin", "ferritin iron", "spleen"))
        before = store.keyword(b, ["cells", "ferritin"], 10)
        store.put_document(a, *document("a.md", *(f"cells sample{i}" for i in range(30))))
        other = self.reopen(store)  # built anew, with a's thirty chunks of "cells" in the store
        try:
            assert other.keyword(other.get_kb("tenant-b"), ["cells", "ferritin"], 10) == before
        finally:
            other.close()
        # in b, "cells" is in one chunk of three: it outweighs "ferritin", in two
        found = store.chunks(b, [k for k, _ in before])
        assert [found[k].text for k, _ in before] == ["cells ferritin", "ferritin iron"]
        assert before[0][1] > before[1][1] > 0

    def test_words_match_in_any_form_and_case(self, store: Store) -> None:
        kb = store.create_kb("kb", config())
        store.put_document(kb, *document("a.md", "Dosing of Ünïcödé tablets", "patch adhesive"))
        for terms in (["dose"], ["doses"], ["DOSING"], ["unicode"], ["ünïcödé"], ["tablet"]):
            hits = store.keyword(kb, terms, 10)
            assert len(hits) == 1, terms
            assert store.chunks(kb, [hits[0][0]])[hits[0][0]].text.startswith("Dosing")
        title = store.keyword(kb, ["title"], 10)  # the title and headings are indexed too
        assert len(title) == 2

    def test_larger_knowledge_bases_use_the_database(self, store: Store) -> None:
        kb = store.create_kb("kb", config())
        store.put_document(kb, *document("a.md", "varenicline tablets varenicline dosing",
                                         "varenicline nausea", "bupropion seizures"))
        memory = store.keyword(kb, ["varenicline", "dosing"], 10)
        small = with_option(store, "keyword_index_max_chunks=2")
        try:
            seen = small.get_kb("kb")
            assert not small.keyword_in_memory(seen) and store.keyword_in_memory(kb)
            database = small.keyword(seen, ["varenicline", "dosing"], 10)
            assert [k for k, _ in database] == [k for k, _ in memory]
            assert small.cache.held("keyword") == []
            assert cast(SQLStore, small).keyword_index_max_chunks == 2
        finally:
            small.close()

    def test_an_index_is_built_once_for_threads_sharing_a_cache(self, store: Store) -> None:
        import threading

        kb = store.create_kb("kb", config())
        store.put_document(kb, *document("a.md", *(f"word{i} common" for i in range(50))))
        stores = [open_store(store.url.replace(":***@", "@"), cache=store.cache) for _ in range(4)]
        results: list[list[tuple[int, float]]] = []
        try:
            threads = [threading.Thread(target=lambda s=s: results.append(
                s.keyword(s.get_kb("kb"), ["common", "word7"], 5))) for s in stores]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
        finally:
            for s in stores:
                s.close()
        assert len(results) == 4 and all(r == results[0] for r in results)
        keyword = {s.kind: s for s in store.cache.stats()}["keyword"]
        assert keyword.misses == 1 and keyword.hits == 3
        assert len(results[0]) == 5 and results[0][0][1] > results[0][1][1]

    def test_chunks_from_memory_are_the_database_rows(self, store: Store) -> None:
        kb = store.create_kb("kb", config())
        other_kb = store.create_kb("other", config())
        store.put_document(kb, *document("a.md", "varenicline nausea", "Ünïcödé «quotes»", "x"))
        store.put_document(kb, *document("b.md", "bupropion seizures"))
        foreign = store.put_document(other_kb, *document("c.md", "elsewhere"))
        assert foreign == "added"
        keys = [int(k) for k in store.dense_index(kb).keys]
        stranger = int(store.dense_index(other_kb).keys[0])
        database = with_option(store, "keyword_index_max_chunks=0")  # reads every chunk by SQL
        try:
            seen = database.get_kb("kb")
            want = database.chunks(seen, [*keys, stranger, -5])
            want_ids = {c.id: database.chunk_by_id(seen, c.id) for c in want.values()}
            assert database.cache.held("keyword") == []
        finally:
            database.close()
        assert store.keyword(kb, ["nausea"], 5)  # the index, and the chunk table, are built
        assert store.cache.held("keyword") == [kb.id]
        reads = _count_reads(store)
        got = store.chunks(kb, [*keys, stranger, -5])
        assert got == want and list(got) == keys  # another knowledge base's key is not its own
        assert {i: store.chunk_by_id(kb, i) for i in want_ids} == want_ids
        assert store.chunk_by_id(kb, "0" * 20) is None
        assert all("FROM chunks" not in sql for sql in reads)  # the version alone was read
        assert store.chunk_by_id(other_kb, next(iter(want_ids))) is None  # (its own rows)
        store.put_document(kb, *document("d.md", "new"))  # the cached table is now stale
        assert store.chunks(kb, keys) == {k: want[k] for k in keys}
        assert any("FROM chunks" in sql for sql in reads)

    def test_a_pinned_version_holds_for_one_question(self, store: Store) -> None:
        kb = store.create_kb("kb", config())
        store.put_document(kb, *document("a.md", "varenicline nausea"))
        other = self.reopen(store)
        try:
            seen = other.get_kb("kb")
            reads = _count_reads(other)
            with other.pinned(seen):
                assert len(other.keyword(seen, ["varenicline"], 5)) == 1
                assert other.dense_index(seen).matrix.shape[0] == 1
                store.put_document(kb, *document("b.md", "varenicline dose"))  # another worker
                assert other.count_chunks(seen) == 1
                assert len(other.keyword(seen, ["varenicline"], 5)) == 1
                with other.pinned(seen):  # nested: the outer pin holds
                    assert other.dense_index(seen).matrix.shape[0] == 1
                    other.chunks(seen, [int(other.dense_index(seen).keys[0])])
            assert sum(sql.startswith("SELECT version FROM kbs") for sql in reads) == 1
            assert len(other.keyword(seen, ["varenicline"], 5)) == 2  # the next question sees it
            with other.pinned(seen):
                other.put_document(seen, *document("c.md", "varenicline patch"))  # its own write
                assert len(other.keyword(seen, ["varenicline"], 5)) == 3
        finally:
            other.close()


def _count_reads(store: Store) -> list[str]:
    """The statements ``store`` reads from now on (autocommit reads, the per-call path)."""
    db = cast(SQLStore, store).db
    seen: list[str] = []
    rows = db.rows

    def counted(sql: str, params: tuple[object, ...] = ()) -> list[tuple[object, ...]]:
        seen.append(sql)
        return rows(sql, params)

    db.rows = counted  # type: ignore[method-assign]
    return seen

