"""The SQLite store's approximate dense search: consistent with the store after every kind of
write, rebuilt or caught up when its file is missing or stale, one graph per knowledge base,
and close to exact search on clustered vectors."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from citewise.errors import ConfigError
from citewise.kb import KBConfig
from citewise.records import Chunk, Document, Section
from citewise.search.retrieval import dense_top
from citewise.stores import open_store
from citewise.stores.sql import SQLStore
from citewise.stores.sqlite import open_sqlite
from citewise.stores.sqlite_ann import HNSWParams

DIM = 32
PARAMS = HNSWParams(connectivity=16, expansion_add=64, expansion_search=64, threads=1)


def clustered(n: int, seed: int = 0, clusters: int = 40) -> np.ndarray:
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(clusters, DIM))
    v = centres[rng.integers(0, clusters, n)] + 0.35 * rng.normal(size=(n, DIM))
    return (v / np.linalg.norm(v, axis=1, keepdims=True)).astype(np.float32)


def doc(doc_id: str, vectors: np.ndarray, tag: str = "") -> tuple[Document, list[Chunk], np.ndarray]:
    texts = tuple(f"{doc_id} passage {i} {tag}" for i in range(len(vectors)))
    d = Document(doc_id, doc_id, (Section(("S",), texts),), doc_id)
    return d, [Chunk(doc_id, i, ("S",), t, doc_id) for i, t in enumerate(texts)], vectors


def open_ann(path: Path) -> SQLStore:
    return open_sqlite(path, ann_min_chunks=1, hnsw=PARAMS)


def fill(store: SQLStore, name: str, vectors: np.ndarray, per_doc: int = 50):
    kb = store.create_kb(name, KBConfig(embedder="hashing:32", dim=DIM))
    for at in range(0, len(vectors), per_doc):
        store.put_document(kb, *doc(f"d{at // per_doc}", vectors[at : at + per_doc]))
    return kb


def exact(store: SQLStore, kb, query: np.ndarray, k: int) -> list[int]:
    index = store.dense_index(kb)
    rows, _ = dense_top(index.matrix, query, k)
    return index.keys[rows].tolist()


def live_keys(store: SQLStore, kb) -> set[int]:
    return {r[0] for r in store.db.conn.execute("SELECT key FROM chunks WHERE kb_id = ?", (kb.id,))}


def test_recall_against_exact_on_clustered_vectors(tmp_path: Path) -> None:
    store = open_ann(tmp_path / "kb.db")
    vectors = clustered(3000)
    kb = fill(store, "kb", vectors)
    assert store.approximate(kb)
    rng = np.random.default_rng(1)
    queries = vectors[rng.integers(0, len(vectors), 100)] + 0.2 * rng.normal(size=(100, DIM))
    queries = (queries / np.linalg.norm(queries, axis=1, keepdims=True)).astype(np.float32)
    hits = 0
    for q in queries:
        keys, cosines = store.dense_search(kb, q, 10)
        truth = exact(store, kb, q, 10)
        hits += len(set(keys.tolist()) & set(truth))
        # cosines are exact, recomputed from the stored float32 vectors, best first
        np.testing.assert_allclose(cosines, store.vectors(kb, keys.tolist()) @ q, rtol=1e-6)
        assert list(cosines) == sorted(cosines, reverse=True)
    assert hits / (10 * len(queries)) >= 0.98


def test_small_knowledge_bases_stay_exact(tmp_path: Path) -> None:
    store = open_sqlite(tmp_path / "kb.db", ann_min_chunks=500, hnsw=PARAMS)
    kb = fill(store, "kb", clustered(200))
    assert not store.approximate(kb)
    q = clustered(1, seed=3)[0]
    assert store.dense_search(kb, q, 10)[0].tolist() == exact(store, kb, q, 10)
    assert not (tmp_path / "kb.db.ann").exists()


def test_graph_follows_ingest_replace_and_delete(tmp_path: Path) -> None:
    store = open_ann(tmp_path / "kb.db")
    vectors = clustered(400)
    kb = fill(store, "kb", vectors)
    q = vectors[7]
    assert store.dense_search(kb, q, 400)[0].size == 400
    old = {r[0] for r in store.db.conn.execute("SELECT key FROM chunks WHERE doc_id = 'd0'")}
    # replace d0 with new passages; delete d1; add d9
    store.put_document(kb, *doc("d0", clustered(30, seed=5), tag="v2"))
    store.delete_document(kb, "d1")
    store.put_document(kb, *doc("d9", clustered(20, seed=6)))
    graph = store.dialect.ann.graphs[kb.id]
    assert graph.version == store._version(kb)  # applied in place, not rebuilt
    keys, _ = store.dense_search(kb, q, 1000)
    assert set(keys.tolist()) == live_keys(store, kb) and not old & set(keys.tolist())
    assert store.dialect.ann.graphs[kb.id] is graph
    # the replaced document's new passages are found where they are
    new_d0 = store.db.conn.execute("SELECT key, vector FROM chunks WHERE doc_id = 'd0'").fetchone()
    hit, cos = store.dense_search(kb, np.frombuffer(new_d0[1], np.float32), 1)
    assert hit.tolist() == [new_d0[0]] and cos[0] == pytest.approx(1.0, abs=1e-5)


def test_missing_file_is_rebuilt_and_stale_file_caught_up(tmp_path: Path) -> None:
    path = tmp_path / "kb.db"
    store = open_ann(path)
    kb = fill(store, "kb", clustered(300))
    q = clustered(1, seed=9)[0]
    first = store.dense_search(kb, q, 10)[0].tolist()
    store.close()
    files = sorted(p.name for p in (tmp_path / "kb.db.ann").iterdir())
    assert files == [f"{kb.id}-{6}.npz", f"{kb.id}-{6}.usearch"]  # 6 documents written

    for f in (tmp_path / "kb.db.ann").iterdir():
        f.unlink()
    again = open_ann(path)
    assert again.dense_search(kb, q, 10)[0].tolist() == first
    assert (tmp_path / "kb.db.ann" / f"{kb.id}-6.usearch").exists()

    # another process writes while this one holds the graph: the version says it is stale
    writer = open_ann(path)
    writer.put_document(kb, *doc("new", np.tile(q, (3, 1))))
    writer.delete_document(kb, "d0")
    writer.db.close()  # a crash: nothing saved by the writer
    keys, cos = again.dense_search(kb, q, 3)
    new = {r[0] for r in again.db.conn.execute("SELECT key FROM chunks WHERE doc_id = 'new'")}
    assert set(keys.tolist()) == new and cos == pytest.approx([1.0] * 3, abs=1e-5)
    assert set(again.dense_search(kb, q, 1000)[0].tolist()) == live_keys(again, kb)
    assert (tmp_path / "kb.db.ann" / f"{kb.id}-8.usearch").exists()
    assert not (tmp_path / "kb.db.ann" / f"{kb.id}-6.usearch").exists()

    # a fresh process starts from the saved file and needs no rebuild
    third = open_ann(path)
    assert third.dense_search(kb, q, 3)[0].tolist() == keys.tolist()


def test_a_key_sqlite_reuses_for_another_chunk_is_replaced(tmp_path: Path) -> None:
    path = tmp_path / "kb.db"
    store = open_ann(path)
    kb = fill(store, "kb", clustered(100))
    q = clustered(1, seed=4)[0]
    store.dense_search(kb, q, 5)  # graph built and saved
    top = store.db.conn.execute("SELECT max(key), doc_id FROM chunks").fetchone()
    other = open_ann(path)
    other.delete_document(kb, top[1])
    other.put_document(kb, *doc("reborn", np.tile(q, (60, 1))))
    assert other.db.conn.execute("SELECT max(key) FROM chunks").fetchone()[0] >= top[0]  # reused
    keys, cos = store.dense_search(kb, q, 60)
    reborn = {r[0] for r in store.db.conn.execute("SELECT key FROM chunks WHERE doc_id = 'reborn'")}
    assert set(keys.tolist()) == reborn and cos.min() == pytest.approx(1.0, abs=1e-5)


def test_knowledge_bases_have_their_own_graphs(tmp_path: Path) -> None:
    store = open_ann(tmp_path / "kb.db")
    shared = clustered(200)
    a = fill(store, "tenant-a", shared)
    b = fill(store, "tenant-b", shared[:120])
    for q in shared[:20]:
        assert set(store.dense_search(b, q, 200)[0].tolist()) <= live_keys(store, b)
        assert set(store.dense_search(a, q, 200)[0].tolist()) <= live_keys(store, a)
    with pytest.raises(Exception, match="not in knowledge base 'tenant-b'"):
        store.vectors(b, sorted(live_keys(store, a))[:3])
    store.delete_kb("tenant-a")
    assert not list((tmp_path / "kb.db.ann").glob(f"{a.id}-*"))
    assert len(store.dense_search(b, shared[0], 200)[0]) == 120
    # a knowledge base that gets a deleted one's id never loads that one's file
    store.close()
    reopened = open_ann(tmp_path / "kb.db")
    c = fill(reopened, "tenant-c", clustered(50, seed=2))
    assert set(reopened.dense_search(c, shared[0], 100)[0].tolist()) == live_keys(reopened, c)


def test_store_url_option(tmp_path: Path) -> None:
    store = open_store(f"sqlite:///{tmp_path}/u.db?ann_min_chunks=123")
    assert store.ann_min_chunks == 123 and store.dialect.path == f"{tmp_path}/u.db"
    with pytest.raises(ConfigError, match="valid: ann_min_chunks"):
        open_store(f"sqlite:///{tmp_path}/u.db?ann=1")
    driver = open_store(f"sqlite+pysqlite:///{tmp_path}/u.db?ann_min_chunks=7")  # as SQLAlchemy writes it
    assert driver.ann_min_chunks == 7 and driver.dialect.path == f"{tmp_path}/u.db"


def test_retrieval_through_the_graph_matches_exact(tmp_path: Path) -> None:
    from citewise.engine import Engine
    from tests.helpers import SAMPLE

    exact_store = open_sqlite(tmp_path / "kb.db", ann_min_chunks=10**9)
    engine = Engine(exact_store)
    kb = engine.open_kb("smoking", embedder="hashing:256")
    engine.ingest(kb, [SAMPLE])
    question = "How long do nicotine withdrawal symptoms last?"
    want = engine.retrieve(kb, question)
    graph_store = open_sqlite(tmp_path / "kb.db", ann_min_chunks=1)
    got = Engine(graph_store).retrieve(kb, question)
    assert graph_store.approximate(kb) and not exact_store.approximate(kb)
    assert [(c.chunk.id, round(c.cosine, 5)) for c in got.context] == [
        (c.chunk.id, round(c.cosine, 5)) for c in want.context]


def test_vectors_switched_to_another_embedder_rebuild_the_graph(tmp_path: Path) -> None:
    from dataclasses import replace

    store = open_ann(tmp_path / "kb.db")
    kb = fill(store, "kb", clustered(200))
    other = open_ann(tmp_path / "kb.db")  # another process, holding the old graph
    q = clustered(1, seed=8)[0]
    store.dense_search(kb, q, 5)
    other.dense_search(kb, q, 5)
    rows = store.db.conn.execute("SELECT key, chunk_id FROM chunks WHERE kb_id = ? ORDER BY key",
                            (kb.id,)).fetchall()
    new = clustered(len(rows), seed=11)
    store.put_shadow_vectors(kb, "other:32", [r[0] for r in rows], [r[1] for r in rows], new)
    switched = store.switch_vectors(kb, replace(kb.config, embedder="other:32"))
    for s in (store, other):
        keys, cos = s.dense_search(switched, new[17], 1)
        assert keys.tolist() == [rows[17][0]] and cos[0] == pytest.approx(1.0, abs=1e-5)


def test_the_search_beam_widens_with_the_graph():
    """A fixed ef_search loses recall as the graph grows; the beam grows with the graph's size,
    with the configured ef_search as its floor, and is what the index searches with."""
    from citewise.stores.sqlite_ann import Graph

    params = HNSWParams(connectivity=8, expansion_add=32, expansion_search=64, chunks_per_ef=40,
                        threads=1)
    graph = Graph(DIM, params)
    small = clustered(400, seed=5)
    graph.add(np.arange(400), [b"x"] * 400, small)
    assert graph.beam() == 64  # 400 // 40 = 10 is under the floor
    more = clustered(3_600, seed=6)
    graph.add(np.arange(400, 4_000), [b"x"] * 3_600, more)
    assert graph.beam() == 100  # 4,000 // 40
    graph.search(more[0], 10)
    assert graph.index.expansion_search == 100
