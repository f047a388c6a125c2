"""One conformance class every store backend runs: override the ``store`` fixture."""

from __future__ import annotations

import numpy as np
import pytest

from citewise.errors import KnowledgeBaseError, QueryLogError, StoreError
from citewise.kb import KBConfig
from citewise.records import Chunk, Document, Section
from citewise.stores.base import Store

DIM = 8


def config() -> KBConfig:
    return KBConfig(embedder="hashing:8", dim=DIM)


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
