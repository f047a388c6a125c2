"""``SearchConformance``: the ``Search`` role (dense and keyword search, chunk reads)."""

from __future__ import annotations

import numpy as np
import pytest

from citewise.errors import StoreError
from citewise.search.retrieval import dense_top
from citewise.stores.roles import Store
from citewise.testing.helpers import DIM, Conformance, config, document


class SearchConformance(Conformance):
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
        store.prepare(kb)
        index = store.dense_index(kb)
        q = index.matrix[1]
        keys, cosines = store.dense_search(kb, q, 2)
        assert len(keys) == 2 and keys[0] == index.keys[1] and not store.approximate(kb)
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

    def test_search_ranks_by_cosine_and_by_keyword_scope(self, store: Store) -> None:
        kb = store.create_kb("kb", config())
        doc, chunks, vectors = document(
            "a.md", "varenicline tablets varenicline dosing", "varenicline nausea",
            "bupropion seizures", "patch adhesive skin",
        )
        store.put_document(kb, doc, chunks, vectors)
        hits = store.keyword(kb, ["varenicline", "dosing"], 10)
        found = store.chunks(kb, [k for k, _ in hits])
        texts = [found[k].text for k, _ in hits]
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
        for terms in (["drop", "table"], ['"quoted"'], ["+y", "-z", "*w"], ["ünïcödé"], ["(", ")"],
                      ["%s", "?"]):
            for key, _ in store.keyword(kb, terms, 5):
                assert store.chunks(kb, [key])[key].text == text
        assert len(store.keyword(kb, ["ünïcödé"], 5)) == 1
        assert store.count_chunks(kb) == 1

    def test_stale_cache_is_never_served_to_another_worker(self, store: Store) -> None:
        kb = store.create_kb("kb", config())
        store.put_document(kb, *document("a.md", "one"))
        other = self.reopen(store)
        try:
            assert other.dense_index(other.get_kb("kb")).matrix.shape == (1, DIM)
            store.put_document(kb, *document("b.md", "two", "three"))
            assert other.dense_index(other.get_kb("kb")).matrix.shape == (3, DIM)
            store.delete_document(kb, "a.md")
            assert other.dense_index(other.get_kb("kb")).matrix.shape == (2, DIM)
            assert other.count_chunks(other.get_kb("kb")) == 2
        finally:
            other.close()
