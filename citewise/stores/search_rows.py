"""The search side of ``SQLStore`` (the ``Search`` role of ``roles.py``): dense vectors, keyword
search and chunk reads, over the store's ``Database`` and its per-knowledge-base caches.

The version counter of each knowledge base (bumped in every write transaction) is read on
every question (once: ``versions.py``), so a stateless worker never serves a cache older than
another worker's write:
the store's ``KBCache`` (``kb_cache.py``) keeps dense matrices and keyword indexes within
``cache_bytes``, least recently used first out, each for the version it was read at; chunk
counts and capped term counts are kept the same way. A knowledge base of at least
``ann_min_chunks`` chunks is searched through the dialect's approximate index where it has
one, and the cosines returned are still computed from the stored vectors, since the gate
reads them.

Keyword search of a knowledge base of up to ``keyword_index_max_chunks`` chunks, not on the
approximate path, is BM25 over an in-memory index of its chunks (``keyword_index.py``); a
larger one is searched by the dialect's full-text index, with the question's common words
pruned as ``citewise/search/keywords.py`` says. The same read keeps the chunks' records
(``chunk_table.py``): while that index is cached for the current version, ``chunks`` and
``chunk_by_id`` are answered from memory, else from the database.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import replace
from typing import Any

import numpy as np

from citewise.errors import StoreError
from citewise.kb import KnowledgeBase
from citewise.records import Chunk
from citewise.storable import storable
from citewise.stores import keyword_index
from citewise.stores.base import DenseIndex
from citewise.stores.chunk_table import ChunkTable, TableBuilder
from citewise.stores.database import gone
from citewise.stores.kb_cache import KBCache
from citewise.stores.keyword_index import KeywordIndex
from citewise.stores.versions import KBVersions

IN_BATCH = 900  # keys per statement: SQLite's bound-parameter limit is 999 on old builds
FETCH = 10_000  # rows decoded at a time when a knowledge base's vectors are read
CHUNK_COLUMNS = "doc_id, ordinal, section, text, title"  # a chunk's record, as ``_chunk`` reads it


def _chunk(row: tuple[Any, ...]) -> Chunk:
    """A chunk from its ``CHUNK_COLUMNS`` (its section path is stored as a JSON list)."""
    return Chunk(row[0], row[1], tuple(json.loads(row[2])), row[3], row[4])


class SQLSearch(KBVersions):
    """Dense, keyword and chunk reads of ``SQLStore``, which provides these three."""

    cache: KBCache
    ann_min_chunks: int
    keyword_index_max_chunks: int
    def count_chunks(self, kb: KnowledgeBase) -> int:
        """The knowledge base's chunks, counted once per version of it (the version is read
        every time, so another worker's writes are seen)."""
        sized = self._sized(kb)
        return sized[1] if sized is not None else 0

    def _sized(self, kb: KnowledgeBase) -> tuple[int, int] | None:
        """``(version, chunk count)`` now (None if the knowledge base is gone): the version is
        one read, the count is counted again only when the version moved."""
        version = self._current(kb)
        if version is None:
            return None
        seen = self.cache.sizes.get(kb.id)
        if seen is not None and seen[0] == version:
            return seen
        rows = self.db.rows("SELECT k.version, (SELECT count(*) FROM chunks c WHERE c.kb_id = k.id) "
                            "FROM kbs k WHERE k.id = %s", (kb.id,))
        if not rows:
            return None
        seen = self.cache.sizes[kb.id] = (int(rows[0][0]), int(rows[0][1]))
        return seen

    # -- dense ----------------------------------------------------------------------------

    def approximate(self, kb: KnowledgeBase) -> bool:
        """Whether dense search of ``kb`` goes through an approximate index (size at this version)."""
        return self._approximate(kb, self.count_chunks(kb))

    def _approximate(self, kb: KnowledgeBase, chunks: int) -> bool:
        ann = self.db.dialect.ann
        return ann is not None and ann.usable(kb) and chunks >= self.ann_min_chunks

    def prepare(self, kb: KnowledgeBase) -> None:
        """Load (or build) the knowledge base's dense index, and its keyword index where it is
        kept in memory, now rather than on the first search."""
        ann = self.db.dialect.ann
        if ann is not None and self.approximate(kb):
            ann.prepare(self.db, kb, self._version(kb))
        else:
            self.dense_index(kb)
        if self.keyword_in_memory(kb):
            self.keyword_index(kb)

    def dense_index(self, kb: KnowledgeBase) -> DenseIndex:
        return self.cache.fetch("dense", kb.id, self._version(kb), lambda: self._read_dense(kb))

    def _read_dense(self, kb: KnowledgeBase) -> DenseIndex:
        with self.db.transaction(write=False) as cur:  # the version, count and rows of one snapshot
            return self._stream_dense(cur, kb)

    def _stream_dense(self, cur: Any, kb: KnowledgeBase) -> DenseIndex:
        """Streamed into one preallocated matrix: a list of a million rows would double the peak."""
        dialect, dim = self.db.dialect, kb.config.dim
        cur.execute("SELECT version FROM kbs WHERE id = %s", (kb.id,))
        row = cur.fetchone()
        if row is None:
            raise gone(kb)
        version, seen = int(row[0]), self.cache.sizes.get(kb.id)
        if seen is None or seen[0] != version:
            cur.execute("SELECT count(*) FROM chunks WHERE kb_id = %s", (kb.id,))
            seen = (version, int(cur.fetchone()[0]))
            self.cache.sizes[kb.id] = seen
        keys = np.empty(seen[1], dtype=np.int64)
        matrix = np.empty((seen[1], dim), dtype=np.float32)
        cur.execute(f"SELECT {dialect.key}, vector FROM chunks WHERE kb_id = %s "
                    f"ORDER BY {dialect.key}", (kb.id,))
        at = 0
        while rows := cur.fetchmany(FETCH):
            if at + len(rows) > len(keys):  # rows committed since the count (not a snapshot)
                keys = np.concatenate([keys, np.empty(len(rows), dtype=np.int64)])
                matrix = np.concatenate([matrix, np.empty((len(rows), dim), dtype=np.float32)])
            keys[at : at + len(rows)] = [r[0] for r in rows]
            matrix[at : at + len(rows)] = dialect.matrix([r[1] for r in rows], dim)
            at += len(rows)
        return DenseIndex(keys[:at], matrix[:at], version)

    def dense_search(self, kb: KnowledgeBase, query: np.ndarray, k: int
                     ) -> tuple[np.ndarray, np.ndarray]:
        """Exact cosine search over the cached matrix; through the approximate index above
        ``ann_min_chunks``, with the candidates' cosines computed from their stored vectors
        (ties by key, as the exact path has them)."""
        ann = self.db.dialect.ann
        if ann is None or k <= 0 or not self.approximate(kb):
            return self.dense_index(kb).search(query, k)
        found, vectors = ann.candidates(self.db, kb, self._version(kb), query, k)
        if vectors is None:
            vectors = self.vectors(kb, found.tolist())
        cosines = vectors @ np.asarray(query, dtype=np.float32)
        order = np.lexsort((found, -cosines))[:k]
        return found[order], cosines[order]

    def vectors(self, kb: KnowledgeBase, keys: list[int]) -> np.ndarray:
        ann, dim = self.db.dialect.ann, kb.config.dim
        if not keys:
            return np.zeros((0, dim), np.float32)
        if ann is None or not self.approximate(kb):
            return self.dense_index(kb).take(keys, kb.name)
        from_index = ann.vectors(kb, self._version(kb), keys)
        if from_index is not None:
            return from_index
        key, found = self.db.dialect.key, dict[int, Any]()
        with self.db.transaction(write=False) as cur:
            for at in range(0, len(keys), IN_BATCH):
                part = [int(k) for k in keys[at : at + IN_BATCH]]
                cur.execute(f"SELECT {key}, vector FROM chunks WHERE kb_id = %s AND {key} IN "
                            f"({','.join(['%s'] * len(part))})", (kb.id, *part))
                found.update((int(r[0]), r[1]) for r in cur.fetchall())
        if len(found) != len(set(keys)):
            raise StoreError(f"chunk keys not in knowledge base {kb.name!r}")
        return self.db.dialect.matrix([found[k] for k in keys], dim)

    # -- keywords and chunks --------------------------------------------------------------

    def keyword_in_memory(self, kb: KnowledgeBase) -> bool:
        """Whether ``keyword`` of ``kb`` is served by the in-memory BM25 index: up to
        ``keyword_index_max_chunks`` chunks, and not on the approximate (ANN) path."""
        sized = self._sized(kb)
        return sized is not None and self._in_memory(kb, sized[1])

    def _in_memory(self, kb: KnowledgeBase, chunks: int) -> bool:
        return chunks <= self.keyword_index_max_chunks and not self._approximate(kb, chunks)

    def keyword(self, kb: KnowledgeBase, terms: list[str], k: int,
                within: list[str] | None = None) -> list[tuple[int, float]]:
        sized = self._sized(kb)
        if sized is None:
            return []
        if self._in_memory(kb, sized[1]):
            index = self.cache.fetch("keyword", kb.id, sized[0], lambda: self._read_keywords(kb))
            return index.search(terms, k, within)
        return self.db.dialect.keyword(self.db.rows, kb, terms, k, within)

    def keyword_index(self, kb: KnowledgeBase) -> KeywordIndex:
        """The in-memory BM25 index of ``kb`` at its current version (built on first use)."""
        return self.cache.fetch("keyword", kb.id, self._version(kb),
                                lambda: self._read_keywords(kb))

    def _read_keywords(self, kb: KnowledgeBase) -> KeywordIndex:
        """Built from one snapshot's version and chunk rows, streamed in ``FETCH`` rows; the
        chunks' records are kept from the same rows (``chunk_table.py``)."""
        with self.db.transaction(write=False) as cur:
            cur.execute("SELECT version FROM kbs WHERE id = %s", (kb.id,))
            row = cur.fetchone()
            if row is None:
                raise gone(kb)
            cur.execute(f"SELECT {self.db.dialect.key}, doc_id, ordinal, section, text, title, "
                        f"chunk_id FROM chunks WHERE kb_id = %s ORDER BY {self.db.dialect.key}",
                        (kb.id,))

            def rows() -> Any:
                while batch := cur.fetchmany(FETCH):
                    yield from batch

            table = TableBuilder()
            index = keyword_index.build(table.rows(rows()), int(row[0]))
        return replace(index, table=table.table())

    def _table(self, kb: KnowledgeBase) -> ChunkTable | None:
        """The chunk records of ``kb`` kept with its keyword index, when that is cached for
        the current version (never built here: a miss reads the database)."""
        version = self._current(kb)
        if version is None:
            return None
        index = self.cache.get("keyword", kb.id, version, count=False)
        return index.table if isinstance(index, KeywordIndex) else None

    def term_counts(self, kb: KnowledgeBase, terms: list[str], cap: int) -> dict[str, int]:
        """Counted as ``keyword`` matches: in the in-memory index where it serves ``kb`` (no
        statement per word), else by the dialect's full-text index."""
        sized = self._sized(kb)
        if sized is not None and self._in_memory(kb, sized[1]):
            index = self.cache.fetch("keyword", kb.id, sized[0], lambda: self._read_keywords(kb))
            return {term: index.count(term, cap) for term in dict.fromkeys(terms)}

        def count(term: str, cap: int) -> int:
            return self.db.dialect.term_count(self.db.rows, kb, term, cap)

        return self.cache.terms.get(kb.id, self._version(kb), terms, cap, count)

    def chunks(self, kb: KnowledgeBase, keys: list[int]) -> dict[int, Chunk]:
        if not keys:
            return {}
        table = self._table(kb)
        if table is not None:
            return table.chunks(keys)
        dialect = self.db.dialect
        rows = self.db.rows(
            f"SELECT {dialect.key}, {CHUNK_COLUMNS} FROM {dialect.chunks_from} "
            f"WHERE kb_id = %s AND {dialect.key} IN ({','.join(['%s'] * len(keys))})",
            (kb.id, *[int(k) for k in keys]),
        )
        return {int(r[0]): _chunk(r[1:]) for r in rows}

    def document_chunks(self, kb: KnowledgeBase, doc_id: str) -> list[Chunk]:
        """One document's chunks in their order (an indexed read: ``chunks_kb_doc``)."""
        rows = self.db.rows(f"SELECT {CHUNK_COLUMNS} FROM chunks WHERE kb_id = %s AND doc_id = %s "
                            "ORDER BY ordinal", (kb.id, doc_id))
        return [_chunk(r) for r in rows]

    def stem_sets(self, kb: KnowledgeBase, keys: list[int],
                    terms: Iterable[str]) -> list[frozenset[str]] | None:
        """Which of ``terms`` each of ``keys`` holds (in order) among the gate's stems, from the
        chunk table, else None."""
        table = self._table(kb)
        return table.stem_sets(keys, terms) if table is not None else None

    def chunk_by_id(self, kb: KnowledgeBase, chunk_id: str) -> Chunk | None:
        if not storable(chunk_id):
            return None
        table = self._table(kb)
        if table is not None:
            return table.by_id(chunk_id)
        rows = self.db.rows(f"SELECT {CHUNK_COLUMNS} FROM chunks WHERE kb_id = %s AND chunk_id = %s",
                            (kb.id, chunk_id))
        return _chunk(rows[0]) if rows else None
