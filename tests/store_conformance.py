"""One conformance class every store backend runs: override the ``store`` fixture."""

from __future__ import annotations

import numpy as np
import pytest

from citewise.errors import KnowledgeBaseError, StoreError
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
