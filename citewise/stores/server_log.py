"""The MySQL and PostgreSQL stores' query log and replay shadow vectors (migrations m002 and
m004), the SQLite store's ``sqlite_log`` with ``%s`` placeholders.

The log is one row per question with the JSON record beside the columns queries filter on
(time, status, path, feedback). Shadow vectors are rows keyed by (knowledge base, chunk key),
of the live vector column's type; ``switch_vectors`` locks the knowledge base's row, checks
every chunk has its shadow, and copies them over the live vectors with the configuration in
one transaction. The copy is a correlated subquery, which both servers accept (their
``UPDATE ... FROM`` / ``UPDATE ... JOIN`` forms differ).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..kb import KBConfig, KnowledgeBase
from . import log_rows
from .base import DenseIndex, LogEntry


class ServerLogMixin:
    """Mixed into ``ServerStore``: expects ``transaction()``, ``_rows``, ``_lock_kb``,
    ``_insert_id``, ``_key``, ``_matrix``, ``_vector_value``, ``get_kb`` and ``_dense``."""

    # -- query log ------------------------------------------------------------------------

    def log_query(
        self, kb: KnowledgeBase, entry: dict[str, Any], embedding: np.ndarray | None,
        feedback_token: str | None = None,
    ) -> int:
        values = log_rows.insert_values(kb, entry, embedding, feedback_token)
        with self.transaction() as cur:  # type: ignore[attr-defined]
            return self._insert_id(cur, log_rows.insert_sql("%s"), values)  # type: ignore[attr-defined]

    def query_log(
        self, kb: KnowledgeBase, since: str | None = None, until: str | None = None,
        embeddings: bool = False,
    ) -> list[LogEntry]:
        sql, args = log_rows.select_sql(kb, since, until, embeddings, "%s")
        return [log_rows.entry(r) for r in self._rows(sql, args)]  # type: ignore[attr-defined]

    def add_feedback(self, kb: KnowledgeBase, query_id: int, helpful: bool, note: str = "") -> None:
        log_rows.check_note(note)
        with self.transaction() as cur:  # type: ignore[attr-defined]
            # found by a read, not the UPDATE's row count: MySQL counts only changed rows
            cur.execute("SELECT id FROM query_log WHERE kb_id = %s AND id = %s FOR UPDATE",
                        (kb.id, int(query_id)))
            if cur.fetchone() is None:
                raise log_rows.no_entry(kb, query_id)
            cur.execute(
                "UPDATE query_log SET feedback = %s, feedback_note = %s, feedback_at = %s "
                "WHERE kb_id = %s AND id = %s",
                (1 if helpful else 0, note, log_rows.now(), kb.id, int(query_id)),
            )

    def add_token_feedback(self, kb: KnowledgeBase, token: str, helpful: bool,
                           note: str = "") -> int:
        log_rows.check_note(note)
        with self.transaction() as cur:  # type: ignore[attr-defined]
            # the row locked: of two feedbacks at once the second reads the first's
            cur.execute(log_rows.token_row_sql("%s", " FOR UPDATE"),
                        (kb.id, log_rows.token_hash(token)))
            query_id = log_rows.first_feedback(kb, cur.fetchone())
            cur.execute("UPDATE query_log SET feedback = %s, feedback_note = %s, "
                        "feedback_at = %s WHERE id = %s",
                        (1 if helpful else 0, note, log_rows.now(), query_id))
        return query_id

    def purge_query_log(self, kb: KnowledgeBase, before: str) -> int:
        with self.transaction() as cur:  # type: ignore[attr-defined]
            cur.execute("DELETE FROM query_log WHERE kb_id = %s AND created_at < %s",
                        (kb.id, before))
            return int(cur.rowcount)

    # -- shadow vectors (replay) ----------------------------------------------------------

    def put_shadow_vectors(
        self, kb: KnowledgeBase, embedder: str, keys: list[int], chunk_ids: list[str],
        vectors: np.ndarray,
    ) -> None:
        vectors = np.ascontiguousarray(vectors, dtype=np.float32)
        rows = [(kb.id, int(k), c, embedder, self._vector_value(v))  # type: ignore[attr-defined]
                for k, c, v in zip(keys, chunk_ids, vectors, strict=True)]
        with self.transaction() as cur:  # type: ignore[attr-defined]
            cur.execute("DELETE FROM shadow_vectors WHERE kb_id = %s AND embedder <> %s",
                        (kb.id, embedder))
            if rows:
                cur.executemany("DELETE FROM shadow_vectors WHERE kb_id = %s AND chunk_key = %s",
                                [r[:2] for r in rows])
                cur.executemany(
                    "INSERT INTO shadow_vectors (kb_id, chunk_key, chunk_id, embedder, vector) "
                    "VALUES (%s, %s, %s, %s, %s)", rows,
                )

    def shadow_index(self, kb: KnowledgeBase, embedder: str, dim: int) -> DenseIndex:
        """The shadow vectors of chunks that still exist, as an index like ``dense_index``."""
        with self.transaction() as cur:  # type: ignore[attr-defined]  # binary vectors on PG
            cur.execute(
                "SELECT s.chunk_key, s.vector FROM shadow_vectors s JOIN chunks c "
                f"ON c.{self._key} = s.chunk_key AND c.kb_id = s.kb_id "  # type: ignore[attr-defined]
                "AND c.chunk_id = s.chunk_id WHERE s.kb_id = %s AND s.embedder = %s "
                "ORDER BY s.chunk_key",
                (kb.id, embedder),
            )
            rows = cur.fetchall()
        keys = np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))
        return DenseIndex(keys, self._matrix([r[1] for r in rows], dim), -1)  # type: ignore[attr-defined]

    def drop_shadow(self, kb: KnowledgeBase) -> None:
        with self.transaction() as cur:  # type: ignore[attr-defined]
            cur.execute("DELETE FROM shadow_vectors WHERE kb_id = %s", (kb.id,))

    def switch_vectors(self, kb: KnowledgeBase, config: KBConfig) -> KnowledgeBase:
        key = self._key  # type: ignore[attr-defined]
        with self.transaction() as cur:  # type: ignore[attr-defined]
            self._lock_kb(cur, kb)  # type: ignore[attr-defined]  # no document changes meanwhile
            cur.execute(
                "SELECT count(*) FROM chunks c WHERE c.kb_id = %s AND NOT EXISTS "
                "(SELECT 1 FROM shadow_vectors s WHERE s.kb_id = c.kb_id "
                f"AND s.chunk_key = c.{key} AND s.chunk_id = c.chunk_id AND s.embedder = %s)",
                (kb.id, config.embedder),
            )
            missing = int(cur.fetchone()[0])
            if missing:
                raise log_rows.missing_vectors(kb, config.embedder, missing)
            cur.execute(
                "UPDATE chunks SET vector = (SELECT s.vector FROM shadow_vectors s "
                f"WHERE s.kb_id = chunks.kb_id AND s.chunk_key = chunks.{key}) WHERE kb_id = %s",
                (kb.id,),
            )
            cur.execute("UPDATE kbs SET config = %s, version = version + 1 WHERE id = %s",
                        (config.to_json(), kb.id))
            # the old embedder's sentence vectors: never served (their keys name it), dropped;
            # `citewise replay --switch` then embeds the new one's (sentence_vectors.backfill)
            cur.execute("DELETE FROM chunk_sentences WHERE kb_id = %s", (kb.id,))
            cur.execute("DELETE FROM shadow_vectors WHERE kb_id = %s", (kb.id,))
        with self._lock:  # type: ignore[attr-defined]
            self._dense.pop(kb.id, None)  # type: ignore[attr-defined]
        return self.get_kb(kb.name)  # type: ignore[attr-defined]
