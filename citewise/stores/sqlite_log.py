"""The SQLite store's query log and replay shadow vectors, kept apart from the content tables.

Plain SQL on purpose (no SQLite-only functions): ``server_log`` is the same for the MySQL
and PostgreSQL stores, and the log's statements and rows are shared in ``log_rows``. The log
is one row per question with the JSON record beside a few columns that queries filter on
(time, status, path, feedback); shadow vectors are rows keyed by (knowledge base, chunk key)
that ``switch_vectors`` copies over the live ones in one transaction.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..kb import KBConfig, KnowledgeBase
from . import log_rows
from .base import DenseIndex, LogEntry


class SQLiteLogMixin:
    """Mixed into ``SQLiteStore``: expects ``db``, ``transaction()``, ``get_kb`` and ``_dense``."""

    # -- query log ------------------------------------------------------------------------

    def log_query(
        self, kb: KnowledgeBase, entry: dict[str, Any], embedding: np.ndarray | None,
        feedback_token: str | None = None,
    ) -> int:
        values = log_rows.insert_values(kb, entry, embedding, feedback_token)
        with self.transaction() as db:  # type: ignore[attr-defined]
            cur = db.execute(log_rows.insert_sql("?"), values)
        return int(cur.lastrowid or 0)

    def query_log(
        self, kb: KnowledgeBase, since: str | None = None, until: str | None = None,
        embeddings: bool = False,
    ) -> list[LogEntry]:
        sql, args = log_rows.select_sql(kb, since, until, embeddings, "?")
        return [log_rows.entry(r) for r in self.db.execute(sql, args)]  # type: ignore[attr-defined]

    def add_feedback(self, kb: KnowledgeBase, query_id: int, helpful: bool, note: str = "") -> None:
        log_rows.check_note(note)
        with self.transaction() as db:  # type: ignore[attr-defined]
            cur = db.execute(
                "UPDATE query_log SET feedback = ?, feedback_note = ?, feedback_at = ? "
                "WHERE kb_id = ? AND id = ?",
                (1 if helpful else 0, note, log_rows.now(), kb.id, int(query_id)),
            )
        if cur.rowcount == 0:
            raise log_rows.no_entry(kb, query_id)

    def add_token_feedback(self, kb: KnowledgeBase, token: str, helpful: bool,
                           note: str = "") -> int:
        log_rows.check_note(note)
        with self.transaction() as db:  # type: ignore[attr-defined]  # BEGIN IMMEDIATE: one at a time
            row = db.execute(log_rows.token_row_sql("?"),
                             (kb.id, log_rows.token_hash(token))).fetchone()
            query_id = log_rows.first_feedback(kb, row)
            db.execute("UPDATE query_log SET feedback = ?, feedback_note = ?, feedback_at = ? "
                       "WHERE id = ?", (1 if helpful else 0, note, log_rows.now(), query_id))
        return query_id

    def purge_query_log(self, kb: KnowledgeBase, before: str) -> int:
        with self.transaction() as db:  # type: ignore[attr-defined]
            cur = db.execute(
                "DELETE FROM query_log WHERE kb_id = ? AND created_at < ?", (kb.id, before)
            )
        return cur.rowcount

    # -- shadow vectors (replay) ----------------------------------------------------------

    def put_shadow_vectors(
        self, kb: KnowledgeBase, embedder: str, keys: list[int], chunk_ids: list[str],
        vectors: np.ndarray,
    ) -> None:
        vectors = np.ascontiguousarray(vectors, dtype=np.float32)
        with self.transaction() as db:  # type: ignore[attr-defined]
            db.execute(
                "DELETE FROM shadow_vectors WHERE kb_id = ? AND embedder <> ?", (kb.id, embedder)
            )
            for key, chunk_id, vector in zip(keys, chunk_ids, vectors, strict=True):
                db.execute("DELETE FROM shadow_vectors WHERE kb_id = ? AND chunk_key = ?",
                           (kb.id, int(key)))
                db.execute(
                    "INSERT INTO shadow_vectors (kb_id, chunk_key, chunk_id, embedder, vector) "
                    "VALUES (?, ?, ?, ?, ?)",
                    (kb.id, int(key), chunk_id, embedder, vector.tobytes()),
                )

    def shadow_index(self, kb: KnowledgeBase, embedder: str, dim: int) -> DenseIndex:
        """The shadow vectors of chunks that still exist, as an index like ``dense_index``."""
        rows = self.db.execute(  # type: ignore[attr-defined]
            "SELECT s.chunk_key, s.vector FROM shadow_vectors s JOIN chunks c "
            "ON c.key = s.chunk_key AND c.kb_id = s.kb_id AND c.chunk_id = s.chunk_id "
            "WHERE s.kb_id = ? AND s.embedder = ? ORDER BY s.chunk_key",
            (kb.id, embedder),
        ).fetchall()
        keys = np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))
        matrix = np.frombuffer(b"".join(r[1] for r in rows), dtype=np.float32)
        return DenseIndex(keys, matrix.reshape(len(rows), dim), -1)

    def drop_shadow(self, kb: KnowledgeBase) -> None:
        with self.transaction() as db:  # type: ignore[attr-defined]
            db.execute("DELETE FROM shadow_vectors WHERE kb_id = ?", (kb.id,))

    def switch_vectors(self, kb: KnowledgeBase, config: KBConfig) -> KnowledgeBase:
        with self.transaction() as db:  # type: ignore[attr-defined]
            missing = db.execute(
                "SELECT count(*) FROM chunks c WHERE c.kb_id = ? AND NOT EXISTS "
                "(SELECT 1 FROM shadow_vectors s WHERE s.kb_id = c.kb_id "
                "AND s.chunk_key = c.key AND s.chunk_id = c.chunk_id AND s.embedder = ?)",
                (kb.id, config.embedder),
            ).fetchone()[0]
            if missing:
                raise log_rows.missing_vectors(kb, config.embedder, missing)
            db.execute(
                "UPDATE chunks SET vector = (SELECT s.vector FROM shadow_vectors s "
                "WHERE s.kb_id = chunks.kb_id AND s.chunk_key = chunks.key) WHERE kb_id = ?",
                (kb.id,),
            )
            db.execute("UPDATE kbs SET config = ?, version = version + 1 WHERE id = ?",
                       (config.to_json(), kb.id))
            # the old embedder's sentence vectors: never served (their keys name it), dropped;
            # `citewise replay --switch` then embeds the new one's (sentence_vectors.backfill)
            db.execute("DELETE FROM chunk_sentences WHERE kb_id = ?", (kb.id,))
            db.execute("DELETE FROM shadow_vectors WHERE kb_id = ?", (kb.id,))
        self._dense.pop(kb.id, None)  # type: ignore[attr-defined]
        return self.get_kb(kb.name)  # type: ignore[attr-defined]
