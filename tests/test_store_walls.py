"""Tenants are walls, at scale: 2,000 knowledge bases of 200 chunks each on every backend, and
no search, listing or error message of one returns another's content. Each tenant is one
document (one write transaction) of short texts: the test is about reads, and commits
dominate its time."""

from __future__ import annotations

import random

import numpy as np
import pytest

from citewise.errors import KnowledgeBaseError
from citewise.stores.roles import Store
from tests.tenants import VOCABULARY, fill, marker, tenant_docs

TENANTS, CHUNKS, DIM, WORDS, PER_DOC = 2000, 200, 16, 10, 200

pytestmark = [pytest.mark.big, pytest.mark.timeout(1200)]


@pytest.fixture(params=["sqlite", "mysql", "postgres"])
def any_store(request: pytest.FixtureRequest) -> Store:
    name = {"sqlite": "store", "mysql": "mysql_store", "postgres": "pg_store"}[request.param]
    return request.getfixturevalue(name)


def test_two_thousand_tenants_never_see_each_other(any_store: Store) -> None:
    store = any_store
    kbs = fill(store, TENANTS, CHUNKS, DIM, f"hashing:{DIM}", words=WORDS, per_doc=PER_DOC)
    rng = random.Random(11)
    keys: dict[int, list[int]] = {}
    first_chunk = {}
    for t, kb in enumerate(kbs):
        docs = list(tenant_docs(t, CHUNKS, DIM, per_doc=PER_DOC, words=WORDS))
        own = marker(t)
        listed = store.list_documents(kb)
        assert [(d.doc_id, d.chunks) for d in listed] == [(d.id, len(c)) for d, c, _ in docs]
        index = store.dense_index(kb)
        np.testing.assert_array_equal(index.matrix, np.concatenate([v for _, _, v in docs]))
        keys[t] = [int(k) for k in index.keys]
        texts = store.chunks(kb, keys[t])
        assert len(texts) == CHUNKS and all(c.text.startswith(own) for c in texts.values())
        first_chunk[t] = docs[0][1][0]
        assert [c.text for c in store.document_chunks(kb, docs[0][0].id)] == [
            c.text for c in docs[0][1]]
        assert sorted(k for k, _ in store.keyword(kb, [own], 500)) == keys[t]
        shared = rng.sample(VOCABULARY, 3)
        found = store.keyword(kb, shared, 50)
        assert found and {k for k, _ in found} <= set(keys[t])

    for t, kb in enumerate(kbs):
        other = rng.choice([o for o in rng.sample(range(TENANTS), 3) if o != t])
        assert store.keyword(kb, [marker(other)], 50) == []
        assert store.keyword(kb, [marker(other), *rng.sample(VOCABULARY, 2)], 50)[0][0] in keys[t]
        assert store.chunks(kb, keys[other][:20]) == {}
        assert store.chunk_by_id(kb, first_chunk[other].id) is None
        assert store.document_chunks(kb, first_chunk[other].doc_id) == []
        assert store.document_hash(kb, first_chunk[other].doc_id) is None
        assert not store.delete_document(kb, first_chunk[other].doc_id)

    gone = kbs[5]
    store.delete_kb(gone.name)
    with pytest.raises(KnowledgeBaseError) as err:
        store.dense_index(gone)
    with pytest.raises(KnowledgeBaseError) as err2:
        store.get_kb(gone.name)
    for message in (str(err.value), str(err2.value)):
        assert "tenant" not in message and gone.name in message
        assert all(kb.name not in message for kb in kbs if kb is not gone)
    assert store.count_chunks(kbs[4]) == store.count_chunks(kbs[6]) == CHUNKS
    assert len(store.list_kbs()) == TENANTS - 1
