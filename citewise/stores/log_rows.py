"""The query log and replay's shadow vectors (migrations m002, m004, m007): the ``QueryLog``
and ``Shadows`` roles of ``roles.py`` over a ``SQLStore``'s database, plain SQL on every backend.

The log is one row per question with the JSON record beside the columns queries filter on
(time, status, path, feedback, the sha256 of the answer's feedback token). Shadow vectors are
rows keyed by (knowledge base, chunk key), of the live vector column's type, which
``SQLStore.switch_vectors`` copies over the live ones in one transaction.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from typing import Any

import numpy as np

from citewise import storable
from citewise.errors import FeedbackGivenError, QueryLogError
from citewise.kb import KnowledgeBase
from citewise.stores.base import DenseIndex, LogEntry
from citewise.stores.database import Database, now

_LOG_COLUMNS = (
    "id, created_at, question, status, path, embedder, record, feedback, feedback_note, "
    "feedback_at"
)
_INSERT = ("INSERT INTO query_log (kb_id, created_at, question, status, path, embedder, "
           "embedding, record, feedback_token) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s)")


def token_hash(token: str) -> str:
    """What the log keeps of an answer's feedback token (migration m007): its sha256."""
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()


def insert_values(kb: KnowledgeBase, entry: dict[str, Any], embedding: np.ndarray | None,
                  feedback_token: str | None = None) -> tuple[Any, ...]:
    blob = None if embedding is None else np.asarray(embedding, dtype=np.float32).tobytes()
    return (kb.id, entry.get("time") or now(),
            entry.get("question") or entry.get("question_hash") or "",
            entry.get("status", ""), entry.get("path", ""), entry.get("embedder", ""),
            blob, json.dumps(entry, ensure_ascii=False),
            None if feedback_token is None else token_hash(feedback_token))


def select_sql(kb: KnowledgeBase, since: str | None, until: str | None,
               embeddings: bool) -> tuple[str, tuple[Any, ...]]:
    """The statement and parameters of ``query_log``: oldest first, ``until`` exclusive."""
    sql = f"SELECT {_LOG_COLUMNS}, {'embedding' if embeddings else 'NULL'} FROM query_log " \
          "WHERE kb_id = %s"
    args: list[Any] = [kb.id]
    if since:
        sql += " AND created_at >= %s"
        args.append(since)
    if until:
        sql += " AND created_at < %s"
        args.append(until)
    return sql + " ORDER BY created_at, id", tuple(args)


def entry(r: tuple[Any, ...]) -> LogEntry:
    return LogEntry(int(r[0]), r[1], r[2], r[3], r[4] or "", r[5], json.loads(r[6]),
                    None if r[10] is None else np.frombuffer(bytes(r[10]), dtype=np.float32),
                    None if r[7] is None else bool(r[7]), r[8] or "", r[9] or "")


def any_feedback(kb: KnowledgeBase, query_id: int) -> Callable[[tuple[Any, ...] | None], int]:
    """An operator's feedback by log id: it overwrites. The same message whether the id is
    missing or another knowledge base's."""
    def check(row: tuple[Any, ...] | None) -> int:
        if row is None:
            raise QueryLogError(f"No query log entry {query_id} in knowledge base {kb.name!r}")
        return int(row[0])

    return check


def first_feedback(kb: KnowledgeBase, row: tuple[Any, ...] | None) -> int:
    """A caller's feedback by token: a wrong token reads like a missing entry, and an answer
    that has its feedback keeps it (``FeedbackGivenError``)."""
    if row is None:
        raise QueryLogError(f"No answer with that feedback token in knowledge base {kb.name!r}")
    if row[1] is not None:
        raise FeedbackGivenError("This answer already has its feedback; the first one stays.")
    return int(row[0])


class QueryLogTable:
    """The query log of ``SQLStore``."""

    db: Database

    def log_query(self, kb: KnowledgeBase, entry: dict[str, Any], embedding: np.ndarray | None,
                  feedback_token: str | None = None) -> int:
        values = insert_values(kb, entry, embedding, feedback_token)
        with self.db.transaction() as cur:
            return self.db.insert_id(cur, _INSERT, values)

    def query_log(self, kb: KnowledgeBase, since: str | None = None, until: str | None = None,
                  embeddings: bool = False) -> list[LogEntry]:
        return [entry(r) for r in self.db.rows(*select_sql(kb, since, until, embeddings))]

    def add_feedback(self, kb: KnowledgeBase, query_id: int, helpful: bool, note: str = "") -> None:
        self._feedback(kb, "id", int(query_id), helpful, note, any_feedback(kb, query_id))

    def add_token_feedback(self, kb: KnowledgeBase, token: str, helpful: bool,
                           note: str = "") -> int:
        return self._feedback(kb, "feedback_token", token_hash(token), helpful, note,
                              lambda row: first_feedback(kb, row))

    def _feedback(self, kb: KnowledgeBase, column: str, value: Any, helpful: bool, note: str,
                  check: Callable[[tuple[Any, ...] | None], int]) -> int:
        """Feedback on the entry whose ``column`` is ``value`` within ``kb``, if ``check``
        passes its row: found by a read, not the UPDATE's row count (MySQL counts only changed
        rows), and held, so of two feedbacks at once the second reads the first's."""
        storable.check(note, "feedback comment")
        with self.db.transaction() as cur:
            cur.execute(f"SELECT id, feedback FROM query_log WHERE kb_id = %s AND {column} = %s"
                        f"{self.db.dialect.lock}", (kb.id, value))
            query_id = check(cur.fetchone())
            cur.execute("UPDATE query_log SET feedback = %s, feedback_note = %s, feedback_at = %s "
                        "WHERE id = %s", (1 if helpful else 0, note, now(), query_id))
        return query_id

    def purge_query_log(self, kb: KnowledgeBase, before: str) -> int:
        with self.db.transaction() as cur:
            cur.execute("DELETE FROM query_log WHERE kb_id = %s AND created_at < %s", (kb.id, before))
            return int(cur.rowcount)


class ShadowTable:
    """Replay's shadow vectors of ``SQLStore`` (its ``switch_vectors`` puts them live)."""

    db: Database

    def put_shadow_vectors(self, kb: KnowledgeBase, embedder: str, keys: list[int],
                           chunk_ids: list[str], vectors: np.ndarray) -> None:
        vectors = np.ascontiguousarray(vectors, dtype=np.float32)
        rows = [(kb.id, int(k), c, embedder, self.db.dialect.vector_value(v))
                for k, c, v in zip(keys, chunk_ids, vectors, strict=True)]
        with self.db.transaction() as cur:
            cur.execute("DELETE FROM shadow_vectors WHERE kb_id = %s AND embedder <> %s",
                        (kb.id, embedder))
            if rows:
                cur.executemany("DELETE FROM shadow_vectors WHERE kb_id = %s AND chunk_key = %s",
                                [r[:2] for r in rows])
                cur.executemany("INSERT INTO shadow_vectors (kb_id, chunk_key, chunk_id, embedder, "
                                "vector) VALUES (%s, %s, %s, %s, %s)", rows)

    def shadow_index(self, kb: KnowledgeBase, embedder: str, dim: int) -> DenseIndex:
        """The shadow vectors of chunks that still exist, as an index like ``dense_index``."""
        with self.db.transaction(write=False) as cur:  # a transaction's cursor: binary on PG
            cur.execute("SELECT s.chunk_key, s.vector FROM shadow_vectors s JOIN chunks c "
                        f"ON c.{self.db.dialect.key} = s.chunk_key AND c.kb_id = s.kb_id "
                        "AND c.chunk_id = s.chunk_id WHERE s.kb_id = %s AND s.embedder = %s "
                        "ORDER BY s.chunk_key", (kb.id, embedder))
            rows = cur.fetchall()
        keys = np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))
        return DenseIndex(keys, self.db.dialect.matrix([r[1] for r in rows], dim), -1)

    def drop_shadow(self, kb: KnowledgeBase) -> None:
        with self.db.transaction() as cur:
            cur.execute("DELETE FROM shadow_vectors WHERE kb_id = %s", (kb.id,))


def missing_vectors(kb: KnowledgeBase, embedder: str, missing: int) -> QueryLogError:
    return QueryLogError(
        f"{missing} chunks of knowledge base {kb.name!r} have no {embedder} "
        "vector (documents changed since the replay); run `citewise replay` again"
    )
