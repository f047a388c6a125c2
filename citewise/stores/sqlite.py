"""The embedded default store: one SQLite file holding any number of knowledge bases.

Vectors are float32 bytes in the chunk rows; the keyword side is SQLite's own FTS5 with the
porter tokenizer, ranked by its BM25. Every statement names the knowledge base it reads: the
FTS query matches the knowledge base's own token (``kb`` column) together with the terms, so
the full-text index itself does the scoping.

Dense search is exact (one matrix product over the knowledge base's cached vectors) below
``ann_min_chunks`` chunks and approximate above (an HNSW graph per knowledge base, see
``sqlite_ann.py``); either way the cosines it returns are exact.
"""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import AlreadyExistsError, KnowledgeBaseError, StoreError
from ..kb import KBConfig, KnowledgeBase, check_name, valid_name
from ..records import Chunk, Document
from ..storable import storable
from . import sentence_rows
from .base import KB_TABLES, DenseIndex, DocumentInfo, PutResult, TermCounts
from .migrations import MIGRATIONS
from .sentence_rows import SentenceRowsMixin, SentenceVectors
from .sqlite_ann import IN_BATCH, AnnIndexes, HNSWParams
from .sqlite_log import SQLiteLogMixin

# Where exact scoring's median passes ~10 ms on this 2-core machine: benchmarks/scale.py
# (2026-11-30, shared with other jobs) measured exact dense p50 6.4 ms at 50,000 chunks,
# 5.2 ms at 100,000 and 10.6 ms at 200,000, against 1.5-3 ms through the graph.
ANN_MIN_CHUNKS = 100_000


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


class SQLiteStore(SQLiteLogMixin, SentenceRowsMixin):
    _mark, _key = "?", "key"

    def __init__(self, path: str | Path, ann_min_chunks: int = ANN_MIN_CHUNKS,
                 hnsw: HNSWParams | None = None) -> None:
        self.path = str(path)
        self.url = f"sqlite:///{self.path}"
        self.ann_min_chunks = ann_min_chunks
        try:
            self.db = sqlite3.connect(
                self.path, isolation_level=None, check_same_thread=False, timeout=30
            )
            self.db.execute("PRAGMA journal_mode=WAL")
            self.db.execute("PRAGMA foreign_keys=ON")
            self.db.execute("PRAGMA synchronous=NORMAL")
        except sqlite3.Error as e:
            raise StoreError(f"Cannot open SQLite store {self.path}: {e}") from None
        self._lock = threading.RLock()
        self._dense: dict[int, DenseIndex] = {}
        self._sizes: dict[int, tuple[int, int]] = {}  # kb id -> (version, chunks)
        self._counts = TermCounts()
        self._ann = AnnIndexes(self.path, hnsw or HNSWParams())
        self.migrate()

    # -- plumbing -------------------------------------------------------------------------

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            self.db.execute("BEGIN IMMEDIATE")
            try:
                yield self.db
            except BaseException:
                self.db.execute("ROLLBACK")
                raise
            self.db.execute("COMMIT")

    def _read(self, sql: str, params: tuple[Any, ...]) -> list[tuple[Any, ...]]:
        return self.db.execute(sql, params).fetchall()

    def _sentence_transaction(self, kb: KnowledgeBase) -> Any:
        return self.transaction()  # BEGIN IMMEDIATE: one writer at a time

    def migrate(self) -> list[str]:
        """Apply the named migrations not yet recorded; return the names applied."""
        applied: list[str] = []
        with self.transaction() as db:
            db.execute(
                "CREATE TABLE IF NOT EXISTS migrations (name TEXT PRIMARY KEY, applied_at TEXT)"
            )
            done = {r[0] for r in db.execute("SELECT name FROM migrations")}
            for name, statements in MIGRATIONS["sqlite"]:
                if name in done:
                    continue
                for statement in statements:
                    db.execute(statement)
                db.execute("INSERT INTO migrations VALUES (?, ?)", (name, _now()))
                applied.append(name)
        return applied

    def close(self) -> None:
        self._ann.close({kb.id: kb for kb in self.list_kbs()})
        self.db.close()

    # -- knowledge bases ------------------------------------------------------------------

    def _kb(self, row: tuple[Any, ...]) -> KnowledgeBase:
        return KnowledgeBase(row[0], row[1], KBConfig.from_json(row[2]), row[3])

    def create_kb(self, name: str, config: KBConfig) -> KnowledgeBase:
        check_name(name)
        with self.transaction() as db:
            if db.execute("SELECT 1 FROM kbs WHERE name = ?", (name,)).fetchone():
                raise AlreadyExistsError(f"Knowledge base {name!r} already exists")
            kb_id = db.execute("INSERT INTO kb_ids DEFAULT VALUES").lastrowid
            db.execute("DELETE FROM kb_ids WHERE id < ?", (kb_id,))  # the counter remembers
            db.execute(
                "INSERT INTO kbs (id, name, config, created_at, version) VALUES (?, ?, ?, ?, 0)",
                (kb_id, name, config.to_json(), _now()),
            )
        return self.get_kb(name)

    def get_kb(self, name: str) -> KnowledgeBase:
        row = self.db.execute(
            "SELECT id, name, config, created_at FROM kbs WHERE name = ?", (name,)
        ).fetchone() if valid_name(name) else None
        if row is None:
            raise KnowledgeBaseError(
                f"No knowledge base named {name!r}; create it with `citewise ingest --kb {name} PATH`"
            )
        return self._kb(row)

    def list_kbs(self) -> list[KnowledgeBase]:
        rows = self.db.execute("SELECT id, name, config, created_at FROM kbs ORDER BY name")
        return [self._kb(r) for r in rows]

    def update_kb(self, name: str, config: KBConfig) -> KnowledgeBase:
        kb = self.get_kb(name)
        with self.transaction() as db:
            db.execute("UPDATE kbs SET config = ? WHERE id = ?", (config.to_json(), kb.id))
        return self.get_kb(name)

    def delete_kb(self, name: str) -> None:
        kb = self.get_kb(name)
        with self.transaction() as db:
            db.execute("DELETE FROM chunk_fts WHERE kb = ?", (f"k{kb.id}",))
            for table in KB_TABLES:
                db.execute(f"DELETE FROM {table} WHERE kb_id = ?", (kb.id,))
            db.execute("DELETE FROM kbs WHERE id = ?", (kb.id,))
        self._dense.pop(kb.id, None)
        self._sizes.pop(kb.id, None)
        self._counts.forget(kb.id)
        self._ann.drop(kb.id)

    # -- documents ------------------------------------------------------------------------

    def document_hash(self, kb: KnowledgeBase, doc_id: str) -> str | None:
        if not storable(doc_id):
            return None
        row = self.db.execute(
            "SELECT content_hash FROM documents WHERE kb_id = ? AND doc_id = ?", (kb.id, doc_id)
        ).fetchone()
        return row[0] if row else None

    def _drop_chunks(self, db: sqlite3.Connection, kb: KnowledgeBase, doc_id: str) -> list[int]:
        """Delete a document's chunks; return their keys when a loaded graph needs them."""
        gone = [r[0] for r in db.execute(
            "SELECT key FROM chunks WHERE kb_id = ? AND doc_id = ?", (kb.id, doc_id)
        )] if kb.id in self._ann.graphs else []
        db.execute(
            "DELETE FROM chunk_fts WHERE rowid IN "
            "(SELECT key FROM chunks WHERE kb_id = ? AND doc_id = ?)",
            (kb.id, doc_id),
        )
        db.execute(sentence_rows.delete_document_sql(self._mark, self._key), (kb.id, kb.id, doc_id))
        db.execute("DELETE FROM chunks WHERE kb_id = ? AND doc_id = ?", (kb.id, doc_id))
        return gone

    def _bump(self, db: sqlite3.Connection, kb: KnowledgeBase) -> int:
        """Bump the knowledge base's version inside the write; return the version before."""
        db.execute("UPDATE kbs SET version = version + 1 WHERE id = ?", (kb.id,))
        return db.execute("SELECT version FROM kbs WHERE id = ?", (kb.id,)).fetchone()[0] - 1

    def put_document(
        self, kb: KnowledgeBase, doc: Document, chunks: list[Chunk], vectors: np.ndarray,
        sentences: Sequence[SentenceVectors | None] | None = None,
    ) -> PutResult:
        if len(chunks) != len(vectors):
            raise StoreError(f"{doc.id}: {len(chunks)} chunks but {len(vectors)} vectors")
        vectors = np.ascontiguousarray(vectors, dtype=np.float32)
        per_chunk = sentence_rows.check(doc.id, chunks, sentences, kb.config.dim)
        with self.transaction() as db:
            old = db.execute(
                "SELECT content_hash FROM documents WHERE kb_id = ? AND doc_id = ?",
                (kb.id, doc.id),
            ).fetchone()
            if old and old[0] == doc.content_hash:
                return "unchanged"
            gone = self._drop_chunks(db, kb, doc.id)
            added: list[tuple[int, str]] = []
            db.execute(
                "INSERT OR REPLACE INTO documents (kb_id, doc_id, title, source, content_hash, "
                "ingested_at) VALUES (?, ?, ?, ?, ?, ?)",
                (kb.id, doc.id, doc.title, doc.source, doc.content_hash, _now()),
            )
            for chunk, vector, said in zip(chunks, vectors, per_chunk, strict=True):
                cur = db.execute(
                    "INSERT INTO chunks (kb_id, doc_id, chunk_id, ordinal, section, title, text, "
                    "vector) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                    (kb.id, doc.id, chunk.id, chunk.ordinal, json.dumps(chunk.section),
                     chunk.title, chunk.text, vector.tobytes()),
                )
                db.execute(
                    "INSERT INTO chunk_fts (rowid, kb, body) VALUES (?, ?, ?)",
                    (cur.lastrowid, f"k{kb.id}", _keyword_text(chunk)),
                )
                added.append((int(cur.lastrowid or 0), chunk.id))
                if said is not None:
                    db.execute(sentence_rows.insert_sql(self._mark), (kb.id, cur.lastrowid, *said.values()))
            before = self._bump(db, kb)
        self._ann.written(kb, before, before + 1, gone, added, vectors)
        return "replaced" if old else "added"

    def switch_vectors(self, kb: KnowledgeBase, config: KBConfig) -> KnowledgeBase:
        """Every vector replaced at once (``replay --switch``): the graph is rebuilt."""
        switched = super().switch_vectors(kb, config)
        self._ann.drop(kb.id)
        return switched

    def delete_document(self, kb: KnowledgeBase, doc_id: str) -> bool:
        if not storable(doc_id):  # never stored, so not there
            return False
        with self.transaction() as db:
            gone = self._drop_chunks(db, kb, doc_id)
            cur = db.execute(
                "DELETE FROM documents WHERE kb_id = ? AND doc_id = ?", (kb.id, doc_id)
            )
            before = self._bump(db, kb)
        self._ann.written(kb, before, before + 1, gone, [], np.zeros((0, kb.config.dim)))
        return cur.rowcount > 0

    def list_documents(self, kb: KnowledgeBase) -> list[DocumentInfo]:
        rows = self.db.execute(
            "SELECT d.doc_id, d.title, d.source, d.content_hash, "
            "(SELECT count(*) FROM chunks c WHERE c.kb_id = d.kb_id AND c.doc_id = d.doc_id), "
            "d.ingested_at FROM documents d WHERE d.kb_id = ? ORDER BY d.doc_id",
            (kb.id,),
        )
        return [DocumentInfo(*r) for r in rows]

    def count_chunks(self, kb: KnowledgeBase) -> int:
        """The knowledge base's chunks, counted once per version of it (kept only when the
        version read after counting is the one read before: no write came in between)."""
        def version() -> int | None:
            row = self.db.execute("SELECT version FROM kbs WHERE id = ?", (kb.id,)).fetchone()
            return None if row is None else int(row[0])

        before = version()
        seen = self._sizes.get(kb.id)
        if seen is not None and seen[0] == before:
            return seen[1]
        count = int(self.db.execute("SELECT count(*) FROM chunks WHERE kb_id = ?", (kb.id,)).fetchone()[0])
        if before is not None and version() == before:
            self._sizes[kb.id] = (before, count)
        return count

    # -- retrieval ------------------------------------------------------------------------

    def _version(self, kb: KnowledgeBase) -> int:
        version = self.db.execute("SELECT version FROM kbs WHERE id = ?", (kb.id,)).fetchone()
        if version is None:
            raise KnowledgeBaseError(f"Knowledge base {kb.name!r} no longer exists")
        return int(version[0])

    def approximate(self, kb: KnowledgeBase) -> bool:
        """Whether dense search of ``kb`` goes through its HNSW graph (size at this version)."""
        return self.count_chunks(kb) >= self.ann_min_chunks

    def prepare(self, kb: KnowledgeBase) -> None:
        """Load (or build) the knowledge base's dense index now rather than on first search."""
        if self.approximate(kb):
            with self._lock:
                self._ann.ensure(self.db, kb, self._version(kb))
        else:
            self.dense_index(kb)

    def dense_search(self, kb: KnowledgeBase, query: np.ndarray, k: int
                     ) -> tuple[np.ndarray, np.ndarray]:
        if not self.approximate(kb):
            return self.dense_index(kb).search(query, k)
        with self._lock:
            found = self._ann.search(self.db, kb, self._version(kb), query, k)
        vectors = self.vectors(kb, found.tolist())
        cosines = vectors @ np.asarray(query, dtype=np.float32)
        order = np.lexsort((found, -cosines))[:k]  # ties by key, as the exact path has them
        return found[order], cosines[order]

    def vectors(self, kb: KnowledgeBase, keys: list[int]) -> np.ndarray:
        dim = kb.config.dim
        if not keys:
            return np.zeros((0, dim), np.float32)
        if not self.approximate(kb):
            return self.dense_index(kb).take(keys, kb.name)
        from_graph = self._ann.vectors(kb, self._version(kb), keys)
        if from_graph is not None:
            return from_graph
        found: dict[int, bytes] = {}
        for at in range(0, len(keys), IN_BATCH):
            part = keys[at : at + IN_BATCH]
            found.update(self.db.execute(
                f"SELECT key, vector FROM chunks WHERE kb_id = ? AND key IN "
                f"({','.join('?' * len(part))})", (kb.id, *part)).fetchall())
        if len(found) != len(set(keys)):
            raise StoreError(f"chunk keys not in knowledge base {kb.name!r}")
        return np.frombuffer(b"".join(found[k] for k in keys), np.float32).reshape(len(keys), dim)

    def dense_index(self, kb: KnowledgeBase) -> DenseIndex:
        version = (self._version(kb),)
        cached = self._dense.get(kb.id)
        if cached is not None and cached.version == version[0]:
            return cached
        with self._lock:
            self.db.execute("BEGIN")  # one snapshot for the version, the count and the rows
            try:
                index = self._read_dense(kb)
            finally:
                self.db.execute("COMMIT")
        self._dense[kb.id] = index
        return index

    def _read_dense(self, kb: KnowledgeBase) -> DenseIndex:
        version = (self._version(kb),)
        # streamed into one preallocated matrix: a list of a million rows would double the peak
        total, dim = self.count_chunks(kb), kb.config.dim
        keys = np.empty(total, dtype=np.int64)
        matrix = np.empty((total, dim), dtype=np.float32)
        cur = self.db.execute("SELECT key, vector FROM chunks WHERE kb_id = ? ORDER BY key", (kb.id,))
        at = 0
        while rows := cur.fetchmany(10_000):
            keys[at : at + len(rows)] = [r[0] for r in rows]
            matrix[at : at + len(rows)] = np.frombuffer(b"".join(r[1] for r in rows), np.float32
                                                        ).reshape(len(rows), dim)
            at += len(rows)
        return DenseIndex(keys[:at], matrix[:at], version[0])

    def keyword(self, kb: KnowledgeBase, terms: list[str], k: int,
                within: list[str] | None = None) -> list[tuple[int, float]]:
        """BM25 over FTS5. With ``within``, the query is ``kb AND (within) AND (others, others,
        within)``: the first conjunct picks the candidates, and since every term then occurs
        exactly twice, FTS5's BM25 is exactly twice the plain OR query's (halved below).
        FTS5 drives the AND by the short lists and seeks in the long ones, so BM25 is
        computed only for the candidates; ``within`` as a subquery filter instead still
        walks every match of the OR (measured 1.3x slower at 200,000 chunks)."""
        terms = list(dict.fromkeys(terms))
        if not terms:
            return []
        scope = f'kb : "k{kb.id}"'
        picked = [t for t in dict.fromkeys(within or []) if t in terms]
        if within is not None and not picked:
            return []
        if not picked or len(picked) == len(terms):
            match, factor = f"{scope} AND body : ({_any(terms)})", 1.0
        else:
            others = [t for t in terms if t not in picked]
            match = f"{scope} AND body : ({_any(picked)}) AND body : ({_any(others + others + picked)})"
            factor = 0.5
        rows = self.db.execute(
            "SELECT rowid, bm25(chunk_fts, 0.0, 1.0) AS score FROM chunk_fts "
            "WHERE chunk_fts MATCH ? ORDER BY score LIMIT ?",
            (match, k),
        ).fetchall()
        return [(r[0], -r[1] * factor) for r in rows]

    def term_counts(self, kb: KnowledgeBase, terms: list[str], cap: int) -> dict[str, int]:
        def count(term: str, cap: int) -> int:
            return int(self.db.execute(
                "SELECT count(*) FROM (SELECT 1 FROM chunk_fts WHERE chunk_fts MATCH ? LIMIT ?)",
                (f'kb : "k{kb.id}" AND body : {_any([term])}', cap),
            ).fetchone()[0])

        return self._counts.get(kb.id, self._version(kb), terms, cap, count)

    def chunks(self, kb: KnowledgeBase, keys: list[int]) -> dict[int, Chunk]:
        if not keys:
            return {}
        marks = ",".join("?" * len(keys))
        rows = self.db.execute(
            f"SELECT key, doc_id, ordinal, section, text, title FROM chunks "
            f"WHERE kb_id = ? AND key IN ({marks})",
            (kb.id, *keys),
        )
        return {r[0]: Chunk(r[1], r[2], tuple(json.loads(r[3])), r[4], r[5]) for r in rows}

    def chunk_by_id(self, kb: KnowledgeBase, chunk_id: str) -> Chunk | None:
        if not storable(chunk_id):
            return None
        row = self.db.execute(
            "SELECT doc_id, ordinal, section, text, title FROM chunks "
            "WHERE kb_id = ? AND chunk_id = ?",
            (kb.id, chunk_id),
        ).fetchone()
        return Chunk(row[0], row[1], tuple(json.loads(row[2])), row[3], row[4]) if row else None


def _any(terms: list[str]) -> str:
    """An FTS5 OR of quoted terms (a term is a phrase of the tokens it splits into)."""
    return " OR ".join('"' + t.replace('"', "") + '"' for t in terms)


def _keyword_text(chunk: Chunk) -> str:
    return "\n".join([chunk.title, *chunk.section, chunk.text])
