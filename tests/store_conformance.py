"""One conformance class every store backend runs: override the ``store`` fixture."""

from __future__ import annotations

import json

import numpy as np
import pytest

from citewise.errors import KnowledgeBaseError, QueryLogError, StoreError
from citewise.kb import KBConfig
from citewise.records import Chunk, Document, Section
from citewise.retrieval import dense_top
from citewise.stores import open_store
from citewise.stores.base import Store
from citewise.stores.migrations import MIGRATIONS
from citewise.stores.sentence_rows import SentenceVectors

DIM = 8


def config() -> KBConfig:
    return KBConfig(embedder="hashing:8", dim=DIM)


def sentences(chunks: list[Chunk], embedder: str = "hashing:8", dtype: str = "f4"
              ) -> list[SentenceVectors]:
    """Two made-up sentence vectors per chunk, keyed by its text's words."""
    out = []
    for c in chunks:
        rng = np.random.default_rng(abs(hash(c.text)) % 2**32)
        texts = [f"{c.text} first", f"{c.text} second"]
        out.append(SentenceVectors.build(embedder, texts, rng.normal(size=(2, DIM)), dtype))
    return out


def sentence_rows(store: Store) -> list[tuple]:
    return sorted(sql(store, "SELECT kb_id, chunk_key FROM chunk_sentences"))


def document(doc_id: str, *texts: str) -> tuple[Document, list[Chunk], np.ndarray]:
    doc = Document(doc_id, f"Title {doc_id}", (Section(("Part",), texts),), doc_id)
    chunks = [Chunk(doc_id, i, ("Part",), t, doc.title) for i, t in enumerate(texts)]
    rng = np.random.default_rng(abs(hash(texts)) % 2**32)
    v = rng.normal(size=(len(texts), DIM)).astype(np.float32)
    return doc, chunks, v / np.linalg.norm(v, axis=1, keepdims=True)


class StoreConformance:
    def test_knowledge_base_lifecycle(self, store: Store) -> None:
        kb = store.create_kb("alpha", config())
        assert [k.name for k in store.list_kbs()] == ["alpha"]
        assert store.get_kb("alpha").config == kb.config
        with pytest.raises(KnowledgeBaseError, match="already exists"):
            store.create_kb("alpha", config())
        store.delete_kb("alpha")
        with pytest.raises(KnowledgeBaseError, match="No knowledge base named 'alpha'"):
            store.get_kb("alpha")

    def test_put_unchanged_replace_delete(self, store: Store) -> None:
        kb = store.create_kb("kb", config())
        assert store.put_document(kb, *document("a.md", "nicotine patch", "gum")) == "added"
        assert store.put_document(kb, *document("a.md", "nicotine patch", "gum")) == "unchanged"
        assert store.count_chunks(kb) == 2
        assert store.put_document(kb, *document("a.md", "varenicline tablets")) == "replaced"
        assert store.count_chunks(kb) == 1
        assert [h for h, _ in store.keyword(kb, ["patch"], 10)] == []
        assert len(store.keyword(kb, ["varenicline"], 10)) == 1
        assert [d.doc_id for d in store.list_documents(kb)] == ["a.md"]
        assert store.delete_document(kb, "a.md")
        assert store.count_chunks(kb) == 0 and store.keyword(kb, ["varenicline"], 10) == []
        assert store.dense_index(kb).matrix.shape == (0, DIM)

    def test_dense_index_cached_until_written(self, store: Store) -> None:
        kb = store.create_kb("kb", config())
        store.put_document(kb, *document("a.md", "one", "two"))
        first = store.dense_index(kb)
        assert store.dense_index(kb) is first
        store.put_document(kb, *document("b.md", "three"))
        second = store.dense_index(kb)
        assert second.matrix.shape == (3, DIM) and second.version != first.version
        chunks = store.chunks(kb, [int(k) for k in second.keys])
        assert sorted(c.text for c in chunks.values()) == ["one", "three", "two"]
        np.testing.assert_allclose(np.linalg.norm(second.matrix, axis=1), 1.0, rtol=1e-5)

    def test_dense_search_returns_exact_cosines_best_first(self, store: Store) -> None:
        kb = store.create_kb("kb", config())
        store.put_document(kb, *document("a.md", "one", "two", "three"))
        index = store.dense_index(kb)
        q = index.matrix[1]
        keys, cosines = store.dense_search(kb, q, 2)
        assert len(keys) == 2 and keys[0] == index.keys[1]
        assert cosines[0] == pytest.approx(1.0, abs=1e-5) and cosines[0] >= cosines[1]
        np.testing.assert_allclose(store.vectors(kb, [int(k) for k in keys]) @ q, cosines, rtol=1e-5)
        assert len(store.dense_search(kb, q, 50)[0]) == 3

    def test_knowledge_bases_never_see_each_other(self, store: Store) -> None:
        a = store.create_kb("tenant-a", config())
        b = store.create_kb("tenant-b", config())
        store.put_document(a, *document("same.md", "secret alpha formula"))
        store.put_document(b, *document("same.md", "public beta notes"))
        assert store.keyword(b, ["secret", "alpha", "formula"], 50) == []
        b_chunks = store.chunks(b, [int(k) for k in store.dense_index(b).keys])
        assert [c.text for c in b_chunks.values()] == ["public beta notes"]
        a_keys = [int(k) for k in store.dense_index(a).keys]
        assert store.chunks(b, a_keys) == {}
        assert set(store.dense_search(b, store.dense_index(a).matrix[0], 50)[0]) <= set(
            store.dense_index(b).keys.tolist())
        with pytest.raises(StoreError):
            store.vectors(b, a_keys)
        chunk_a = store.chunks(a, a_keys)[a_keys[0]]
        assert store.chunk_by_id(b, chunk_a.id) is None
        assert store.chunk_by_id(a, chunk_a.id) == chunk_a
        store.delete_kb("tenant-a")
        assert store.count_chunks(b) == 1

    def test_failed_write_leaves_previous_version(self, store: Store) -> None:
        kb = store.create_kb("kb", config())
        store.put_document(kb, *document("a.md", "original text"))
        doc, chunks, vectors = document("a.md", "new text", "more")
        with pytest.raises(StoreError):
            store.put_document(kb, doc, chunks, vectors[:1])
        kept = store.chunks(kb, [int(k) for k in store.dense_index(kb).keys])
        assert [c.text for c in kept.values()] == ["original text"]

    def test_query_log(self, store: Store) -> None:
        kb = store.create_kb("kb", config())
        first = store.log_query(kb, {"question": "q?", "status": "refused"}, np.ones(DIM))
        second = store.log_query(kb, {"question": "q2?", "status": "answered"}, np.ones(DIM))
        assert second > first > 0

    # -- keyword pruning on large knowledge bases (citewise/keywords.py) ---------------------

    def test_term_counts_are_capped_and_per_knowledge_base(self, store: Store) -> None:
        a = store.create_kb("tenant-a", config())
        b = store.create_kb("tenant-b", config())
        store.put_document(a, *document("a.md", *(f"cells sample{i}" for i in range(6)), "ferritin"))
        store.put_document(b, *document("b.md", "cells ferritin", "ferritin iron", "ferritin"))
        counts = store.term_counts(a, ["cells", "ferritin", "zyzzyva"], 4)
        assert counts == {"cells": 4, "ferritin": 1, "zyzzyva": 0}
        assert store.term_counts(a, ["cells"], 100) == {"cells": 6}
        assert store.term_counts(b, ["cells", "ferritin"], 100) == {"cells": 1, "ferritin": 3}
        store.put_document(b, *document("c.md", "cells again"))  # a new version: counted again
        assert store.term_counts(b, ["cells"], 100) == {"cells": 2}
        assert store.term_counts(a, ["cells"], 100) == {"cells": 6}

    def test_keyword_within_ranks_only_chunks_holding_those_terms(self, store: Store) -> None:
        kb = store.create_kb("kb", config())
        texts = ("cells ferritin", "cells cells iron", "ferritin iron", "cells", "nothing here")
        store.put_document(kb, *document("a.md", *texts))
        terms = ["cells", "ferritin", "iron"]
        plain = dict(store.keyword(kb, terms, 10))
        within = store.keyword(kb, terms, 10, within=["ferritin"])
        found = store.chunks(kb, [k for k, _ in within])
        assert sorted(found[k].text for k, _ in within) == ["cells ferritin", "ferritin iron"]
        for key, score in within:  # each scored as without ``within``
            assert score == pytest.approx(plain[key], rel=1e-6)
        assert [k for k, _ in within] == [k for k, _ in sorted(within, key=lambda h: -h[1])]
        assert store.keyword(kb, terms, 10, within=["zyzzyva"]) == []
        assert dict(store.keyword(kb, terms, 10, within=terms)) == pytest.approx(plain)

    # -- added with the server stores -------------------------------------------------------

    def test_ingest_reingest_and_replace_keep_counts_right(self, store: Store) -> None:
        kb = store.create_kb("kb", config())
        docs = [document(f"d{i}.md", *(f"alpha{i} body{j}" for j in range(5))) for i in range(4)]
        assert [store.put_document(kb, *d) for d in docs] == ["added"] * 4
        assert [store.put_document(kb, *d) for d in docs] == ["unchanged"] * 4
        assert store.count_chunks(kb) == 20
        assert [(d.doc_id, d.chunks) for d in store.list_documents(kb)] == [
            (f"d{i}.md", 5) for i in range(4)
        ]
        assert store.document_hash(kb, "d2.md") == docs[2][0].content_hash
        assert store.put_document(kb, *document("d2.md", "gamma replaced")) == "replaced"
        assert store.document_hash(kb, "d2.md") != docs[2][0].content_hash
        assert store.count_chunks(kb) == 16
        assert store.keyword(kb, ["alpha2"], 10) == []
        assert len(store.keyword(kb, ["gamma"], 10)) == 1
        assert store.dense_index(kb).matrix.shape == (16, DIM)
        assert not store.delete_document(kb, "missing.md")
        assert store.document_hash(kb, "missing.md") is None

    def test_search_ranks_by_cosine_and_by_keyword_scope(self, store: Store) -> None:
        kb = store.create_kb("kb", config())
        doc, chunks, vectors = document(
            "a.md", "varenicline tablets varenicline dosing", "varenicline nausea",
            "bupropion seizures", "patch adhesive skin",
        )
        store.put_document(kb, doc, chunks, vectors)
        hits = store.keyword(kb, ["varenicline", "dosing"], 10)
        texts = [c.text for c in map(store.chunks(kb, [k for k, _ in hits]).get, [k for k, _ in hits])]
        assert texts == ["varenicline tablets varenicline dosing", "varenicline nausea"]
        assert hits[0][1] > hits[1][1] > 0
        assert len(store.keyword(kb, ["varenicline"], 1)) == 1
        assert store.keyword(kb, [], 10) == [] and store.keyword(kb, ["zyzzyva"], 10) == []
        index = store.dense_index(kb)
        rows, cosines = dense_top(index.matrix, vectors[2], 2)
        best = store.chunks(kb, [int(index.keys[rows[0]])])
        assert [c.text for c in best.values()] == ["bupropion seizures"]
        assert cosines[0] == pytest.approx(1.0, abs=1e-5)
        np.testing.assert_allclose(index.rows([int(index.keys[rows[0]])])[0], vectors[2], rtol=1e-6)
        assert store.chunk_by_id(kb, chunks[3].id) == chunks[3]

    def test_odd_input_is_data_not_syntax(self, store: Store) -> None:
        kb = store.create_kb("kb", config())
        text = "It's 0.5 mg \"quoted\" -- (x) +y ~z *w % _ \\ ; DROP TABLE chunks; ünïcödé 漢字"
        store.put_document(kb, *document("we'ird \"name\".md", text))
        doc_ids = [d.doc_id for d in store.list_documents(kb)]
        assert doc_ids == ["we'ird \"name\".md"]
        for terms in (["drop", "table"], ['"quoted"'], ["+y", "-z", "*w"], ["ünïcödé"], ["(", ")"]):
            for key, _ in store.keyword(kb, terms, 5):
                assert store.chunks(kb, [key])[key].text == text
        assert len(store.keyword(kb, ["ünïcödé"], 5)) == 1
        assert store.count_chunks(kb) == 1

    def test_names_are_exact(self, store: Store) -> None:
        store.create_kb("Case", config())
        store.create_kb("case", config())
        assert [k.name for k in store.list_kbs()] == ["Case", "case"]
        kb = store.get_kb("Case")
        store.put_document(kb, *document("A.md", "upper"))
        store.put_document(kb, *document("a.md", "lower"))
        assert [d.doc_id for d in store.list_documents(kb)] == ["A.md", "a.md"]
        assert store.list_documents(store.get_kb("case")) == []

    def test_tenant_wall_covers_writes_and_errors(self, store: Store) -> None:
        a = store.create_kb("tenant-a", config())
        b = store.create_kb("tenant-b", config())
        store.put_document(a, *document("shared.md", "alpha secret ledger"))
        store.put_document(b, *document("other.md", "beta open notes"))
        assert not store.delete_document(b, "shared.md")
        assert store.document_hash(b, "shared.md") is None
        assert store.put_document(b, *document("shared.md", "beta version")) == "added"
        assert [c.text for c in store.chunks(a, [int(k) for k in store.dense_index(a).keys]).values()] \
            == ["alpha secret ledger"]
        store.delete_kb("tenant-b")
        with pytest.raises(KnowledgeBaseError) as err:
            store.dense_index(b)
        assert "tenant-a" not in str(err.value) and "alpha" not in str(err.value)
        with pytest.raises(KnowledgeBaseError) as err:
            store.get_kb("tenant-c")
        assert "tenant-a" not in str(err.value)
        assert store.keyword(a, ["beta"], 10) == []
        assert [k.name for k in store.list_kbs()] == ["tenant-a"]

    def test_stale_cache_is_never_served_to_another_worker(self, store: Store) -> None:
        kb = store.create_kb("kb", config())
        store.put_document(kb, *document("a.md", "one"))
        other = open_store(_reopen_url(store))
        try:
            assert other.dense_index(other.get_kb("kb")).matrix.shape == (1, DIM)
            store.put_document(kb, *document("b.md", "two", "three"))
            assert other.dense_index(other.get_kb("kb")).matrix.shape == (3, DIM)
            store.delete_document(kb, "a.md")
            assert other.dense_index(other.get_kb("kb")).matrix.shape == (2, DIM)
        finally:
            other.close()

    def test_migrations_are_named_and_applied_once(self, store: Store) -> None:
        backend = "sqlite" if store.url.startswith("sqlite") else store.backend
        expected = [name for name, _ in MIGRATIONS[backend]]
        assert expected[:2] == ["m001_initial", "m002_query_log"]
        assert sorted(r[0] for r in sql(store, "SELECT name FROM migrations")) == expected
        other = open_store(_reopen_url(store))
        try:
            assert other.migrate() == []
        finally:
            other.close()
        assert sorted(r[0] for r in sql(store, "SELECT name FROM migrations")) == expected

    def test_m009_drops_only_the_local_models_sentence_rows(self, store: Store) -> None:
        local = store.create_kb("local", KBConfig(embedder="local:all-MiniLM-L6-v2", dim=DIM))
        hashing = store.create_kb("hashing", config())
        for kb in (local, hashing):
            doc, chunks, vectors = document("a.md", "one", "two")
            store.put_document(kb, doc, chunks, vectors, sentences(chunks))
        write(store, "DELETE FROM migrations WHERE name = 'm009_contextual_sentence_vectors'")
        open_store(_reopen_url(store)).close()  # opening applies it
        assert [r[0] for r in sentence_rows(store)] == [hashing.id] * 2
        assert sql(store, "SELECT name FROM migrations WHERE name = 'm009_contextual_sentence_vectors'")

    def test_m010_drops_the_sentence_rows_of_chunks_with_lines(self, store: Store) -> None:
        kb = store.create_kb("kb", config())
        doc, chunks, vectors = document("a.md", "Prose only. Two sentences.", "Steps:\n- one\n- two",
                                        "| a | b |\n| 1 | 2 |")
        store.put_document(kb, doc, chunks, vectors, sentences(chunks))
        write(store, "DELETE FROM migrations WHERE name = 'm010_structured_units'")
        open_store(_reopen_url(store)).close()  # opening applies it
        assert len(sentence_rows(store)) == 1
        assert list(store.sentence_vectors(kb, [c.id for c in chunks])) == [chunks[0].id]

    def test_sentence_vectors_are_read_back_per_knowledge_base(self, store: Store) -> None:
        a, b = store.create_kb("a", config()), store.create_kb("b", config())
        doc, chunks, vectors = document("same.md", "alpha one", "alpha two")
        written = sentences(chunks)
        assert store.put_document(a, doc, chunks, vectors, written) == "added"
        store.put_document(b, *document("same.md", "beta one"))  # no sentence vectors
        ids = [c.id for c in chunks]
        found = store.sentence_vectors(a, [*ids, "no-such-chunk"])
        assert sorted(found) == sorted(ids)
        for chunk, mine in zip(chunks, written, strict=True):
            assert found[chunk.id].keys == mine.keys
            np.testing.assert_array_equal(found[chunk.id].vectors, mine.vectors)
        assert store.sentence_vectors(b, ids) == {}  # same ids asked of another knowledge base
        b_ids = [c.id for c in document("same.md", "beta one")[1]]
        assert store.sentence_vectors(b, b_ids) == {}  # stored without: simply absent
        assert store.sentence_vectors(a, []) == {}

    def test_sentence_vectors_keep_float16(self, store: Store) -> None:
        kb = store.create_kb("kb", config())
        doc, chunks, vectors = document("a.md", "one")
        half = sentences(chunks, dtype="f2")
        store.put_document(kb, doc, chunks, vectors, half)
        found = store.sentence_vectors(kb, [chunks[0].id])[chunks[0].id]
        assert found.vectors.dtype == np.float16
        np.testing.assert_array_equal(found.vectors, half[0].vectors)

    def test_sentence_vectors_go_with_their_document(self, store: Store) -> None:
        kb, other = store.create_kb("kb", config()), store.create_kb("other", config())
        doc, chunks, vectors = document("a.md", "one", "two")
        store.put_document(kb, doc, chunks, vectors, sentences(chunks))
        store.put_document(other, doc, chunks, vectors, sentences(chunks))
        assert [r[0] for r in sentence_rows(store)] == [kb.id] * 2 + [other.id] * 2
        new_doc, new_chunks, new_vectors = document("a.md", "three")
        assert store.put_document(kb, new_doc, new_chunks, new_vectors,
                                  [None]) == "replaced"  # replaced without: old rows gone
        assert store.sentence_vectors(kb, [c.id for c in chunks + new_chunks]) == {}
        store.put_document(kb, doc, chunks, vectors, sentences(chunks))  # replaced again, with
        assert sorted(store.sentence_vectors(kb, [c.id for c in chunks])) == sorted(c.id for c in chunks)
        keys = {int(k) for k in store.dense_index(kb).keys}
        assert {r[1] for r in sentence_rows(store) if r[0] == kb.id} == keys
        store.delete_document(kb, "a.md")
        assert [r[0] for r in sentence_rows(store)] == [other.id] * 2
        store.delete_kb("other")
        assert sentence_rows(store) == []

    def test_sentence_vectors_must_fit_the_chunks(self, store: Store) -> None:
        kb = store.create_kb("kb", config())
        doc, chunks, vectors = document("a.md", "one", "two")
        with pytest.raises(StoreError, match="2 chunks but 1 sentence vector sets"):
            store.put_document(kb, doc, chunks, vectors, sentences(chunks)[:1])
        wide = [SentenceVectors.build("hashing:8", ["x"], np.ones((1, DIM + 1)))] * 2
        with pytest.raises(StoreError, match="9-dimensional sentence vectors"):
            store.put_document(kb, doc, chunks, vectors, wide)
        assert store.count_chunks(kb) == 0 and sentence_rows(store) == []

    def test_sentence_vectors_backfilled_for_chunks_without(self, store: Store) -> None:
        kb, other = store.create_kb("kb", config()), store.create_kb("other", config())
        doc, chunks, vectors = document("a.md", "one", "two", "three")
        store.put_document(kb, doc, chunks, vectors, [sentences(chunks)[0], None, None])
        store.put_document(other, doc, chunks, vectors)
        keys = [int(k) for k in store.dense_index(kb).keys]
        assert store.chunks_without_sentences(kb, -1, 10) == keys[1:]
        assert store.chunks_without_sentences(kb, keys[1], 10) == keys[2:]
        assert store.chunks_without_sentences(kb, -1, 1) == keys[1:2]
        filled = sentences(chunks[1:])
        other_key = int(store.dense_index(other).keys[0])
        store.put_sentence_vectors(kb, [(keys[1], chunks[1].id, filled[0]),
                                        (keys[2], "replaced-since", filled[1]),  # skipped
                                        (other_key, chunks[0].id, filled[0])])  # another kb's
        assert store.chunks_without_sentences(kb, -1, 10) == keys[2:]
        assert sorted(store.sentence_vectors(kb, [c.id for c in chunks])) == sorted(
            c.id for c in chunks[:2])
        assert store.sentence_vectors(other, [c.id for c in chunks]) == {}
        store.put_sentence_vectors(kb, [(keys[1], chunks[1].id, filled[1])])  # replaces its row
        assert store.sentence_vectors(kb, [chunks[1].id])[chunks[1].id].keys == filled[1].keys

    def test_switching_embedder_drops_sentence_vectors(self, store: Store) -> None:
        kb, other = store.create_kb("kb", config()), store.create_kb("other", config())
        for k in (kb, other):
            doc, chunks, vectors = document("a.md", "one")
            store.put_document(k, doc, chunks, vectors, sentences(chunks))
        key = int(store.dense_index(kb).keys[0])
        store.put_shadow_vectors(kb, "hashing:4", [key], [chunks[0].id], np.eye(4, dtype=np.float32)[:1])
        switched = store.switch_vectors(kb, KBConfig(embedder="hashing:4", dim=4))
        assert store.sentence_vectors(switched, [chunks[0].id]) == {}
        assert [r[0] for r in sentence_rows(store)] == [other.id]

    def test_query_log_keeps_the_record_and_the_embedding(self, store: Store) -> None:
        kb = store.create_kb("kb", config())
        other = store.create_kb("other", config())
        entry = {"question": "How long does withdrawal last?", "status": "answered",
                 "embedder": "hashing:8", "time": "2026-01-01T00:00:00+00:00", "top": [0.5]}
        vec = np.arange(DIM, dtype=np.float32) / DIM
        first = store.log_query(kb, entry, vec)
        second = store.log_query(other, {"question": "q2?", "status": "refused"}, np.ones(DIM))
        assert second > first > 0
        rows = sql(store, "SELECT kb_id, created_at, question, status, embedder, embedding, record "
                   "FROM query_log WHERE id = %s", (first,))
        kb_id, created, question, status, embedder, embedding, record = rows[0]
        assert (kb_id, created, question, status, embedder) == (
            kb.id, entry["time"], entry["question"], "answered", "hashing:8")
        np.testing.assert_array_equal(np.frombuffer(bytes(embedding), dtype=np.float32), vec)
        assert json.loads(record) == entry
        store.delete_kb("other")
        assert [r[0] for r in sql(store, "SELECT id FROM query_log ORDER BY id")] == [first]


def _reopen_url(store: Store) -> str:
    return store.url.replace(":***@", "@")  # test servers have no password


def write(store: Store, statement: str) -> None:
    """Change the store's tables directly (tests only), committed."""
    if store.url.startswith("sqlite"):
        store.db.execute(statement)
        return
    cur = store._begin()  # type: ignore[attr-defined]
    cur.execute(statement)
    store._commit(cur)  # type: ignore[attr-defined]


def sql(store: Store, query: str, params: tuple = ()) -> list[tuple]:
    """Read the store's tables directly (tests only): ``%s`` placeholders on every backend."""
    if store.url.startswith("sqlite"):
        return store.db.execute(query.replace("%s", "?"), params).fetchall()
    return store._rows(query, params)


class QueryLogConformance:
    """The query log v2 and replay's shadow vectors (migration m004_query_log_v2).

    Every store whose backend has that migration inherits this class beside StoreConformance.
    """

    def test_query_log_reads_in_time_order_with_since_and_until(self, store: Store) -> None:
        kb = store.create_kb("kb", config())
        other = store.create_kb("other", config())
        for day, q in ((3, "c"), (1, "a"), (2, "b")):
            store.log_query(kb, {"question": q, "status": "answered", "path": "answered",
                                 "embedder": "hashing:8", "time": f"2026-01-0{day}T00:00:00+00:00",
                                 "extra": {"n": day}}, np.full(DIM, day, np.float32))
        store.log_query(other, {"question": "secret", "time": "2026-01-02T00:00:00+00:00"}, None)
        rows = store.query_log(kb)
        assert [r.question for r in rows] == ["a", "b", "c"] and rows[0].embedding is None
        assert rows[0].path == "answered" and rows[0].record["extra"] == {"n": 1}
        got = store.query_log(kb, since="2026-01-02T00:00:00+00:00", until="2026-01-03T00:00:00+00:00",
                              embeddings=True)
        assert [r.question for r in got] == ["b"]
        np.testing.assert_array_equal(got[0].embedding, np.full(DIM, 2, np.float32))
        assert [r.question for r in store.query_log(other)] == ["secret"]
        assert store.query_log(other, embeddings=True)[0].embedding is None
        assert store.purge_query_log(kb, "2026-01-03T00:00:00+00:00") == 2
        assert [r.question for r in store.query_log(kb)] == ["c"]
        assert len(store.query_log(other)) == 1

    def test_feedback_is_scoped_to_the_knowledge_base(self, store: Store) -> None:
        a = store.create_kb("a", config())
        b = store.create_kb("b", config())
        mine = store.log_query(a, {"question": "q", "status": "answered"}, None)
        theirs = store.log_query(b, {"question": "q", "status": "answered"}, None)
        store.add_feedback(a, mine, True, "good")
        row = store.query_log(a)[0]
        assert (row.feedback, row.feedback_note) == (True, "good") and row.feedback_at
        store.add_feedback(a, mine, False)
        assert store.query_log(a)[0].feedback is False
        missing = theirs + 1000
        with pytest.raises(QueryLogError) as gone:
            store.add_feedback(a, missing, True)
        with pytest.raises(QueryLogError) as foreign:
            store.add_feedback(a, theirs, True)
        assert str(foreign.value) == str(gone.value).replace(str(missing), str(theirs))
        assert store.query_log(b)[0].feedback is None

    def test_switch_vectors_is_all_or_nothing(self, store: Store) -> None:
        kb = store.create_kb("kb", config())
        store.put_document(kb, *document("a.md", "one", "two"))
        index = store.dense_index(kb)
        keys = [int(k) for k in index.keys]
        ids = [store.chunks(kb, [k])[k].id for k in keys]
        new = np.eye(4, dtype=np.float32)[: len(keys)]
        store.put_shadow_vectors(kb, "hashing:4", keys[:1], ids[:1], new[:1])
        assert store.shadow_index(kb, "hashing:4", 4).matrix.shape == (1, 4)
        target = KBConfig(embedder="hashing:4", dim=4)
        with pytest.raises(QueryLogError, match="1 chunks .* have no hashing:4 vector"):
            store.switch_vectors(kb, target)
        assert store.get_kb("kb").config == config()
        np.testing.assert_array_equal(store.dense_index(kb).matrix, index.matrix)
        store.put_shadow_vectors(kb, "hashing:4", keys, ids, new)
        switched = store.switch_vectors(kb, target)
        assert switched.config == target
        np.testing.assert_array_equal(store.dense_index(switched).matrix, new)
        assert store.shadow_index(switched, "hashing:4", 4).matrix.shape == (0, 4)

    def test_deleting_a_kb_clears_its_log_and_shadow_vectors(self, store: Store) -> None:
        kb = store.create_kb("kb", config())
        other = store.create_kb("other", config())
        for k in (kb, other):
            store.put_document(k, *document("a.md", "one"))
            key = int(store.dense_index(k).keys[0])
            store.put_shadow_vectors(k, "hashing:4", [key], [store.chunks(k, [key])[key].id],
                                     np.eye(4, dtype=np.float32)[:1])
            store.log_query(k, {"question": "q", "status": "answered"}, None)
        store.delete_kb("kb")
        assert sql(store, "SELECT kb_id FROM shadow_vectors") == [(other.id,)]
        assert [r[0] for r in sql(store, "SELECT kb_id FROM query_log")] == [other.id]
        assert store.shadow_index(other, "hashing:4", 4).matrix.shape == (1, 4)
