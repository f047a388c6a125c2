"""``SentenceConformance``: the ``Sentences`` role (each chunk's sentence vectors)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from citewise.errors import StoreError
from citewise.kb import KBConfig
from citewise.stores.roles import Store
from citewise.stores.sentence_rows import SentenceVectors
from citewise.testing.helpers import DIM, Conformance, config, document, sentences


class SentenceConformance(Conformance):
    def sentence_rows(self, store: Store) -> list[tuple[Any, ...]]:
        """(kb id, chunk key) of every sentence row in the store, read from its tables."""
        return sorted(self.table(store, "SELECT kb_id, chunk_key FROM chunk_sentences"))

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
        assert [r[0] for r in self.sentence_rows(store)] == [kb.id] * 2 + [other.id] * 2
        new_doc, new_chunks, new_vectors = document("a.md", "three")
        assert store.put_document(kb, new_doc, new_chunks, new_vectors,
                                  [None]) == "replaced"  # replaced without: old rows gone
        assert store.sentence_vectors(kb, [c.id for c in chunks + new_chunks]) == {}
        store.put_document(kb, doc, chunks, vectors, sentences(chunks))  # replaced again, with
        assert sorted(store.sentence_vectors(kb, [c.id for c in chunks])) == sorted(c.id for c in chunks)
        keys = {int(k) for k in store.dense_index(kb).keys}
        assert {r[1] for r in self.sentence_rows(store) if r[0] == kb.id} == keys
        store.delete_document(kb, "a.md")
        assert [r[0] for r in self.sentence_rows(store)] == [other.id] * 2
        store.delete_kb("other")
        assert self.sentence_rows(store) == []

    def test_sentence_vectors_must_fit_the_chunks(self, store: Store) -> None:
        kb = store.create_kb("kb", config())
        doc, chunks, vectors = document("a.md", "one", "two")
        with pytest.raises(StoreError, match="2 chunks but 1 sentence vector sets"):
            store.put_document(kb, doc, chunks, vectors, sentences(chunks)[:1])
        wide = [SentenceVectors.build("hashing:8", ["x"], np.ones((1, DIM + 1)))] * 2
        with pytest.raises(StoreError, match="9-dimensional sentence vectors"):
            store.put_document(kb, doc, chunks, vectors, wide)
        assert store.count_chunks(kb) == 0 and self.sentence_rows(store) == []

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
        assert [r[0] for r in self.sentence_rows(store)] == [other.id]
