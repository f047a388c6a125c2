"""Approximate dense search for large knowledge bases in the SQLite store: one HNSW graph
(usearch) per knowledge base, persisted beside the store file.

    kb.db.ann/<kb_id>-<version>.usearch   the graph and its (half-precision) vectors
    kb.db.ann/<kb_id>-<version>.npz       chunk keys and chunk ids it holds, and whose it is

The graph only proposes candidates; the caller computes their cosines from float32 vectors,
because the gate reads raw cosines: the graph keeps float32 copies by default (as much memory
as the exact path's matrix, and no read from the store per question); with ``dtype="f16"`` it
takes half of that and candidates' vectors are read back from the store. Consistency with
the store:

- writes made through this process update a loaded graph in place (add and remove by chunk
  key) right after their transaction commits;
- writes made by any other process are caught up by a diff: the store's version counter says
  the graph is stale, and the (chunk key, chunk id) pairs of the knowledge base, compared
  with the ones the graph holds, say which keys to remove and which to add (a key SQLite
  reused for a different chunk shows up as a changed id);
- a missing, unreadable or foreign file (another knowledge base that once had this id) is
  rebuilt from the store; so is a graph of another embedder than the knowledge base's (its
  vectors were switched by ``replay --switch``), or one whose removals passed a quarter of
  its size.

The graph is saved when it had to be built or caught up, and on ``close`` when writes of this
process changed it; a crash only leaves an older file, which the next search catches up.
One graph per knowledge base, and every candidate's vector is read back with the knowledge
base in the query, so no search can return another knowledge base's chunks.
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from citewise.errors import StoreError
from citewise.kb import KnowledgeBase

if TYPE_CHECKING:
    from citewise.stores.database import Database

BATCH = 20_000
IN_BATCH = 900  # SQLite's bound-parameter limit is 999 on old builds
REBUILD_REMOVED_SHARE = 0.25


@dataclass(frozen=True)
class HNSWParams:
    """HNSW settings, tuned on train claims: recall@10 0.998 on 6,710 real SciFact MiniLM vectors
    (benchmarks/ann_tuning.py), 0.997 on 100,000 perturbed ones (ef_search 256: 0.984).

    A fixed beam loses recall as the graph grows (perturbed SciFact, train claims, recall@10 at
    ef_search 512: 0.991 at 200,000 chunks, 0.966 at 500,000, 0.863 at 2,000,000; at 2,000,000
    a beam of 1,024 gave 0.900, 2,048 0.951, 4,096 0.982), so the beam is one per
    ``chunks_per_ef`` chunks of the graph, never below ``expansion_search``: the smallest round
    rule keeping train recall@10 at 0.98 at every measured size (``benchmarks/scale.py --sweep``).
    """

    connectivity: int = 16  # M: neighbours per node
    expansion_add: int = 128  # ef_construction
    expansion_search: int = 512  # ef_search floor (the search widens to k when k is larger)
    chunks_per_ef: int = 450  # ef_search = max(expansion_search, size // chunks_per_ef)
    dtype: str = "f32"  # vectors inside the graph; "f16" halves memory, re-reads from the store
    threads: int = 0  # for building; 0 = all cores


def _usearch():
    try:
        from usearch.index import Index
    except ImportError as e:  # pragma: no cover - usearch is a main dependency
        raise StoreError("approximate search needs usearch: pip install usearch") from e
    return Index


class Graph:
    """One knowledge base's HNSW graph with the (key, chunk id) pairs it holds."""

    def __init__(self, dim: int, params: HNSWParams, version: int = -1, embedder: str = "") -> None:
        self.params = params
        self.embedder = embedder
        self.index = _usearch()(
            ndim=dim, metric="cos", dtype=params.dtype, connectivity=params.connectivity,
            expansion_add=params.expansion_add, expansion_search=params.expansion_search,
        )
        self.ids: dict[int, bytes] = {}
        self.version = version
        self.saved_version = -2
        self.removed = 0

    def __len__(self) -> int:
        return len(self.ids)

    def add(self, keys: np.ndarray, ids: list[bytes], vectors: np.ndarray, threads: int = 1) -> None:
        if len(keys):
            self.index.add(np.asarray(keys, dtype=np.uint64), vectors, threads=threads)
            self.ids.update(zip((int(k) for k in keys), ids, strict=True))

    def remove(self, keys: list[int]) -> None:
        keys = [k for k in keys if k in self.ids]
        if keys:
            self.index.remove(np.asarray(keys, dtype=np.uint64))
            for k in keys:
                del self.ids[k]
            self.removed += len(keys)

    def search(self, query: np.ndarray, k: int) -> np.ndarray:
        """The graph's ``k`` nearest keys (its beam widens with the graph, see HNSWParams)."""
        if not self.ids:
            return np.zeros(0, dtype=np.int64)
        self.index.expansion_search = self.beam()
        found = self.index.search(np.asarray(query, dtype=np.float32), min(k, len(self.ids)),
                                  threads=1)
        return np.asarray(found.keys, dtype=np.int64)

    def beam(self) -> int:
        """ef_search for a graph of this size."""
        return max(self.params.expansion_search, len(self.ids) // self.params.chunks_per_ef)

    def vectors(self, keys: list[int]) -> np.ndarray | None:
        """The exact float32 vectors of ``keys`` if the graph keeps them and holds every key."""
        if self.params.dtype != "f32" or any(k not in self.ids for k in keys):
            return None
        return np.vstack(self.index.get(np.asarray(keys, dtype=np.uint64)))

    def save(self, folder: Path, kb: KnowledgeBase) -> None:
        """Write ``<kb_id>-<version>`` atomically (temp names, then rename) and drop older files."""
        folder.mkdir(parents=True, exist_ok=True)
        stem = folder / f"{kb.id}-{self.version}"
        tmp = f".tmp-{os.getpid()}-{threading.get_ident()}"
        keys = np.fromiter(self.ids, dtype=np.int64, count=len(self.ids))
        ids = np.array([self.ids[int(k)] for k in keys], dtype="S20")
        meta = json.dumps({"kb": kb.name, "created_at": kb.created_at, "dim": kb.config.dim,
                           "embedder": self.embedder,
                           "version": self.version, "removed": self.removed,
                           "params": self.params.__dict__})
        self.index.save(f"{stem}.usearch{tmp}")
        with open(f"{stem}.npz{tmp}", "wb") as f:
            np.savez(f, keys=keys, ids=ids, meta=np.array(meta))
        os.replace(f"{stem}.usearch{tmp}", f"{stem}.usearch")
        os.replace(f"{stem}.npz{tmp}", f"{stem}.npz")
        for old in folder.glob(f"{kb.id}-*"):
            if not old.name.startswith(f"{kb.id}-{self.version}."):
                old.unlink(missing_ok=True)
        self.saved_version = self.version

    @classmethod
    def load(cls, folder: Path, kb: KnowledgeBase, params: HNSWParams) -> Graph | None:
        """The newest saved graph of this knowledge base, or None if absent, unreadable or
        another knowledge base's (a knowledge base id SQLite reused after a delete)."""
        saved = sorted(folder.glob(f"{kb.id}-*.npz"), key=_version_of, reverse=True)
        for npz in saved:
            try:
                with np.load(npz) as f:
                    keys, ids, meta = f["keys"], f["ids"], json.loads(str(f["meta"]))
                if (meta["kb"], meta["created_at"], meta["dim"], meta.get("embedder")) != (
                        kb.name, kb.created_at, kb.config.dim, kb.config.embedder):
                    return None
                graph = cls(kb.config.dim, params, meta["version"], meta["embedder"])
                graph.index.load(str(npz.with_suffix(".usearch")))
                graph.index.expansion_search = params.expansion_search
                if len(graph.index) != len(keys):
                    return None
                graph.ids = dict(zip(keys.tolist(), ids.tolist(), strict=True))
                graph.removed, graph.saved_version = meta["removed"], meta["version"]
                return graph
            except (OSError, ValueError, KeyError, RuntimeError):
                continue
        return None


def _version_of(path: Path) -> int:
    try:
        return int(path.stem.rsplit("-", 1)[1])
    except (IndexError, ValueError):
        return -1


class AnnIndexes:
    """The graphs of one SQLite store, loaded on first search and kept in step with it."""

    def __init__(self, db_path: str, params: HNSWParams) -> None:
        self.folder = Path(f"{db_path}.ann")
        self.params = params
        self.graphs: dict[int, Graph] = {}
        self._lock = threading.RLock()

    # -- reading (the ``Ann`` hooks of dialect.py) -------------------------------------------

    def usable(self, kb: KnowledgeBase) -> bool:
        return True

    def tracks(self, kb: KnowledgeBase) -> bool:
        return kb.id in self.graphs

    def prepare(self, db: Database, kb: KnowledgeBase, version: int) -> None:
        with db.lock, self._lock:
            self.ensure(db.conn, kb, version)

    def candidates(self, db: Database, kb: KnowledgeBase, version: int, query: np.ndarray,
                   k: int) -> tuple[np.ndarray, None]:
        """Candidate chunk keys for ``query`` (their cosines are the caller's to compute)."""
        with db.lock, self._lock:
            return self.ensure(db.conn, kb, version).search(query, k), None

    def vectors(self, kb: KnowledgeBase, version: int, keys: list[int]) -> np.ndarray | None:
        """Vectors of ``keys`` from the graph of ``kb`` if it is loaded, current and has them."""
        with self._lock:
            graph = self.graphs.get(kb.id)
            return graph.vectors(keys) if graph and graph.version == version else None

    def ensure(self, db: sqlite3.Connection, kb: KnowledgeBase, version: int) -> Graph:
        """The graph of ``kb`` as of store ``version``: loaded, caught up or built."""
        graph = self.graphs.get(kb.id)
        if graph is not None and graph.embedder != kb.config.embedder:
            graph = None  # vectors switched to another embedder by another process
        if graph is not None and graph.version == version:
            return graph
        if graph is None:
            graph = Graph.load(self.folder, kb, self.params)
        if graph is None or graph.removed > REBUILD_REMOVED_SHARE * max(len(graph), 1):
            graph = self._build(db, kb)
        else:
            self._catch_up(db, kb, graph)
        graph.version = version
        self.graphs[kb.id] = graph
        if graph.saved_version != version:
            graph.save(self.folder, kb)
        return graph

    def _build(self, db: sqlite3.Connection, kb: KnowledgeBase) -> Graph:
        graph = Graph(kb.config.dim, self.params, embedder=kb.config.embedder)
        cur = db.execute(
            "SELECT key, chunk_id, vector FROM chunks WHERE kb_id = ? ORDER BY key", (kb.id,))
        while rows := cur.fetchmany(BATCH):
            graph.add(*_unpack(rows, kb.config.dim), threads=self.params.threads)
        return graph

    def _catch_up(self, db: sqlite3.Connection, kb: KnowledgeBase, graph: Graph) -> None:
        rows = db.execute("SELECT key, chunk_id FROM chunks WHERE kb_id = ?", (kb.id,)).fetchall()
        now = {key: cid.encode() for key, cid in rows}
        gone = [k for k, cid in graph.ids.items() if now.get(k) != cid]
        graph.remove(gone)
        new = [k for k in now if k not in graph.ids]
        for at in range(0, len(new), IN_BATCH):
            part = new[at : at + IN_BATCH]
            got = db.execute(
                f"SELECT key, chunk_id, vector FROM chunks WHERE kb_id = ? AND key IN "
                f"({','.join('?' * len(part))})", (kb.id, *part)).fetchall()
            graph.add(*_unpack(got, kb.config.dim), threads=self.params.threads)

    # -- writing ----------------------------------------------------------------------------

    def written(self, kb: KnowledgeBase, old_version: int, removed: list[int],
                added: list[tuple[int, str]], vectors: np.ndarray) -> None:
        """Apply a committed write to the loaded graph, if it was current before it; a graph
        that was already behind is left for the next search to catch up."""
        with self._lock:
            graph = self.graphs.get(kb.id)
            if graph is None or graph.version != old_version:
                return
            graph.remove(removed)
            graph.add(np.array([k for k, _ in added], dtype=np.int64),
                      [cid.encode() for _, cid in added], vectors)
            graph.version = old_version + 1

    def drop(self, cur: object, kb: KnowledgeBase) -> None:
        with self._lock:
            self.graphs.pop(kb.id, None)
            for path in self.folder.glob(f"{kb.id}-*"):
                path.unlink(missing_ok=True)

    def close(self, db: Database) -> None:
        """Save graphs changed by this process's writes since they were last saved."""
        from citewise.stores.database import KB_COLUMNS, kb_of

        with self._lock:
            changed = [kb_id for kb_id, g in self.graphs.items() if g.saved_version != g.version]
            kbs = {kb.id: kb for kb in map(kb_of, db.rows(
                f"SELECT {KB_COLUMNS} FROM kbs WHERE id IN ({','.join(['%s'] * len(changed))})",
                tuple(changed)))} if changed else {}
            for kb_id, graph in self.graphs.items():
                if graph.saved_version != graph.version and kb_id in kbs:
                    graph.save(self.folder, kbs[kb_id])
            self.graphs.clear()


def _unpack(rows: list[tuple], dim: int) -> tuple[np.ndarray, list[bytes], np.ndarray]:
    keys = np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))
    ids = [r[1].encode() for r in rows]
    vectors = np.frombuffer(b"".join(r[2] for r in rows), dtype=np.float32).reshape(len(rows), dim)
    return keys, ids, vectors
