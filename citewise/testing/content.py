"""``ContentConformance``: the ``Content`` role (knowledge bases and documents)."""

from __future__ import annotations

import pytest

from citewise.errors import ConfigError, KnowledgeBaseError, StoreError
from citewise.stores.roles import Store
from citewise.testing.helpers import DIM, Conformance, config, document


class ContentConformance(Conformance):
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

    def test_failed_write_leaves_previous_version(self, store: Store) -> None:
        kb = store.create_kb("kb", config())
        store.put_document(kb, *document("a.md", "original text"))
        doc, chunks, vectors = document("a.md", "new text", "more")
        with pytest.raises(StoreError):
            store.put_document(kb, doc, chunks, vectors[:1])
        with pytest.raises(StoreError, match="4-dimensional vectors"):
            store.put_document(kb, doc, chunks, vectors[:, :4])
        kept = store.chunks(kb, [int(k) for k in store.dense_index(kb).keys])
        assert [c.text for c in kept.values()] == ["original text"]

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

    def test_names_are_exact(self, store: Store) -> None:
        store.create_kb("Case", config())
        store.create_kb("case", config())
        assert [k.name for k in store.list_kbs()] == ["Case", "case"]
        kb = store.get_kb("Case")
        store.put_document(kb, *document("A.md", "upper"))
        store.put_document(kb, *document("a.md", "lower"))
        assert [d.doc_id for d in store.list_documents(kb)] == ["A.md", "a.md"]
        assert store.list_documents(store.get_kb("case")) == []

    def test_unstorable_names_are_never_found(self, store: Store) -> None:
        kb = store.create_kb("kb", config())
        for bad in ("a\x00b", "a\ud800b"):
            with pytest.raises(KnowledgeBaseError, match="No knowledge base named"):
                store.get_kb(bad)
            with pytest.raises(ConfigError):
                store.create_kb(bad, config())
            assert store.chunk_by_id(kb, bad) is None and store.document_hash(kb, bad) is None
            assert store.delete_document(kb, bad) is False

    def test_knowledge_base_wall_covers_writes_and_errors(self, store: Store) -> None:
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
            store.put_document(b, *document("late.md", "written after the delete"))
        assert "tenant-a" not in str(err.value)
        with pytest.raises(KnowledgeBaseError) as err:
            store.get_kb("tenant-c")
        assert "tenant-a" not in str(err.value)
        assert store.keyword(a, ["beta"], 10) == []
        assert [k.name for k in store.list_kbs()] == ["tenant-a"]
