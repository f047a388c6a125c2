"""The query log's SQL and rows, shared by the SQLite and server stores (``sqlite_log``,
``server_log``): only the placeholder (``?`` or ``%s``) and the driver differ."""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime
from typing import Any

import numpy as np

from .. import storable
from ..errors import FeedbackGivenError, QueryLogError
from ..kb import KnowledgeBase
from .base import LogEntry

_LOG_COLUMNS = (
    "id, created_at, question, status, path, embedder, record, feedback, feedback_note, "
    "feedback_at"
)


def now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def token_hash(token: str) -> str:
    """What the log keeps of an answer's feedback token (migration m007): its sha256."""
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()


def insert_sql(mark: str) -> str:
    return ("INSERT INTO query_log (kb_id, created_at, question, status, path, embedder, "
            f"embedding, record, feedback_token) VALUES ({', '.join([mark] * 9)})")


def insert_values(kb: KnowledgeBase, entry: dict[str, Any], embedding: np.ndarray | None,
                  feedback_token: str | None = None) -> tuple[Any, ...]:
    blob = None if embedding is None else np.asarray(embedding, dtype=np.float32).tobytes()
    return (kb.id, entry.get("time") or now(),
            entry.get("question") or entry.get("question_hash") or "",
            entry.get("status", ""), entry.get("path", ""), entry.get("embedder", ""),
            blob, json.dumps(entry, ensure_ascii=False),
            None if feedback_token is None else token_hash(feedback_token))


def check_note(note: str) -> str:
    return storable.check(note, "feedback comment")


def token_row_sql(mark: str, lock: str = "") -> str:
    """The id and feedback of the row holding a token's hash, in one knowledge base."""
    return (f"SELECT id, feedback FROM query_log WHERE kb_id = {mark} "
            f"AND feedback_token = {mark}{lock}")


def first_feedback(kb: KnowledgeBase, row: tuple[Any, ...] | None) -> int:
    """The row's id when it may take feedback: a wrong token reads like a missing entry, and
    an answer that has its feedback keeps it (``FeedbackGivenError``)."""
    if row is None:
        raise QueryLogError(f"No answer with that feedback token in knowledge base {kb.name!r}")
    if row[1] is not None:
        raise FeedbackGivenError("This answer already has its feedback; the first one stays.")
    return int(row[0])


def select_sql(kb: KnowledgeBase, since: str | None, until: str | None, embeddings: bool,
               mark: str) -> tuple[str, tuple[Any, ...]]:
    """The statement and parameters of ``query_log``: oldest first, ``until`` exclusive."""
    sql = f"SELECT {_LOG_COLUMNS}, {'embedding' if embeddings else 'NULL'} FROM query_log " \
          f"WHERE kb_id = {mark}"
    args: list[Any] = [kb.id]
    if since:
        sql += f" AND created_at >= {mark}"
        args.append(since)
    if until:
        sql += f" AND created_at < {mark}"
        args.append(until)
    return sql + " ORDER BY created_at, id", tuple(args)


def entry(r: tuple[Any, ...]) -> LogEntry:
    return LogEntry(int(r[0]), r[1], r[2], r[3], r[4] or "", r[5], json.loads(r[6]),
                    None if r[10] is None else np.frombuffer(bytes(r[10]), dtype=np.float32),
                    None if r[7] is None else bool(r[7]), r[8] or "", r[9] or "")


def no_entry(kb: KnowledgeBase, query_id: int) -> QueryLogError:
    """The same message whether the id is missing or another knowledge base's."""
    return QueryLogError(f"No query log entry {query_id} in knowledge base {kb.name!r}")


def missing_vectors(kb: KnowledgeBase, embedder: str, missing: int) -> QueryLogError:
    return QueryLogError(
        f"{missing} chunks of knowledge base {kb.name!r} have no {embedder} "
        "vector (documents changed since the replay); run `citewise replay` again"
    )
