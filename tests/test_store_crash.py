"""Crash safety: a child process ingests documents (then new versions of them) and is killed
with SIGKILL at a random point; afterwards every document is either whole, in exactly one
version, with chunks, vectors, sentence vectors and keyword rows agreeing, or absent, and ingesting again
completes. At least 20 runs per backend, with a fixed seed."""

from __future__ import annotations

import multiprocessing
import os
import random
import signal
import time

import numpy as np
import pytest

from citewise.kb import KBConfig
from citewise.records import Chunk, Document, Section
from citewise.stores import open_store
from citewise.stores.roles import Store
from citewise.stores.sentence_rows import SentenceVectors
from citewise.testing.sql import rows as sql

RUNS, DOCS, CHUNKS, DIM = 20, 8, 40, 16

pytestmark = [pytest.mark.big, pytest.mark.timeout(1200)]


def version_of(doc_no: int, version: int
               ) -> tuple[Document, list[Chunk], np.ndarray, list[SentenceVectors]]:
    mark = f"doc{chr(97 + doc_no)}ver{chr(97 + version)}mark"
    texts = tuple(f"{mark} passage {'abcdefghij'[i % 10]}{i} about nicotine" for i in range(CHUNKS))
    doc_id = f"d{doc_no}.md"
    doc = Document(doc_id, "Title", (Section(("Part",), texts),), doc_id)
    chunks = [Chunk(doc_id, i, ("Part",), t, doc.title) for i, t in enumerate(texts)]
    rng = np.random.default_rng([doc_no, version])
    v = rng.standard_normal((CHUNKS, DIM), dtype=np.float32)
    v = v / np.linalg.norm(v, axis=1, keepdims=True)
    sentences = [SentenceVectors.build(f"hashing:{DIM}", [c.text], v[i : i + 1])
                 for i, c in enumerate(chunks)]
    return doc, chunks, v, sentences


def _ingest(url: str, kb_name: str, done: multiprocessing.connection.Connection) -> None:
    store = open_store(url)
    kb = store.get_kb(kb_name)
    for version in (0, 1):
        for doc_no in range(DOCS):
            store.put_document(kb, *version_of(doc_no, version))
            done.send(1)
    time.sleep(600)  # wait for the kill: a run always ends by SIGKILL


def check_whole_or_absent(store: Store, kb_name: str) -> int:
    """Assert every document is whole in one version or absent; return how many are present."""
    kb = store.get_kb(kb_name)
    index = store.dense_index(kb)
    chunks = store.chunks(kb, [int(k) for k in index.keys])
    listed = {d.doc_id: d for d in store.list_documents(kb)}
    assert {c.doc_id for c in chunks.values()} == set(listed)
    assert store.count_chunks(kb) == len(index.keys) == CHUNKS * len(listed)
    for doc_no in range(DOCS):
        versions = [version_of(doc_no, v) for v in (0, 1)]
        doc_id = versions[0][0].id
        if doc_id not in listed:
            for doc, *_ in versions:
                assert store.keyword(kb, [doc.sections[0].paragraphs[0].split()[0]], 100) == []
            continue
        [(doc, want, vectors, said)] = [v for v in versions
                                        if v[0].content_hash == listed[doc_id].content_hash]
        keys = sorted(k for k, c in chunks.items() if c.doc_id == doc_id)
        assert [chunks[k] for k in keys] == want
        np.testing.assert_array_equal(index.rows(keys), vectors)
        stored = store.sentence_vectors(kb, [c.id for c in want])
        assert [stored[c.id].keys for c in want] == [s.keys for s in said]
        mark = want[0].text.split()[0]
        assert sorted(k for k, _ in store.keyword(kb, [mark], 100)) == keys
        other = [v for v in versions if v[0] is not doc][0][1][0].text.split()[0]
        assert store.keyword(kb, [other], 100) == []
    # no sentence row outlives its chunk
    assert sql(store, "SELECT count(*) FROM chunk_sentences WHERE kb_id = %s", (kb.id,))[0][0] \
        == len(index.keys)
    return len(listed)


@pytest.fixture(params=["sqlite", "mysql", "postgres"])
def store_url(request: pytest.FixtureRequest, tmp_path: object) -> object:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path}/crash.db"
        return
    fresh = request.getfixturevalue("mysql_database" if request.param == "mysql" else "pg_database")
    with fresh() as url:
        yield url


def test_sigkill_during_ingest_leaves_documents_whole_or_absent(store_url: str) -> None:
    ctx = multiprocessing.get_context("fork")
    rng = random.Random(1234)
    store = open_store(store_url)
    present = []
    try:
        for run in range(RUNS):
            kb_name = f"run{run}"
            store.create_kb(kb_name, KBConfig(embedder=f"hashing:{DIM}", dim=DIM))
            receive, send = ctx.Pipe(duplex=False)
            child = ctx.Process(target=_ingest, args=(store_url, kb_name, send), daemon=True)
            child.start()
            send.close()
            # kill after a random number of documents plus a random part of one more write
            target = rng.randrange(0, 2 * DOCS)
            started = time.perf_counter()
            for _ in range(target):
                receive.recv()
            per_doc = (time.perf_counter() - started) / target if target else 0.02
            time.sleep(rng.uniform(0.0, 1.2 * per_doc))
            os.kill(child.pid, signal.SIGKILL)
            child.join()
            assert child.exitcode == -signal.SIGKILL
            present.append(check_whole_or_absent(store, kb_name))

            kb = store.get_kb(kb_name)
            for doc_no in range(DOCS):
                store.put_document(kb, *version_of(doc_no, 1))
            assert check_whole_or_absent(store, kb_name) == DOCS
            assert all(d.content_hash == version_of(int(d.doc_id[1:-3]), 1)[0].content_hash
                       for d in store.list_documents(kb))
    finally:
        store.close()
    assert len(set(present)) > 3, f"kills landed at too few points: {present}"
