"""The query log's SQL and rows, shared by the SQLite and server stores (``sqlite_log``,
``server_log``): only the placeholder (``?`` or ``%s``) and the driver differ."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import numpy as np

from ..errors import QueryLogError
from ..kb import KnowledgeBase
from .base import LogEntry

_LOG_COLUMNS = (
    "id, created_at, question, status, path, embedder, record, feedback, feedback_note, "
    "feedback_at"
)


def now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def insert_sql(mark: str) -> str:
    return ("INSERT INTO query_log (kb_id, created_at, question, status, path, embedder, "
            f"embedding, record) VALUES ({', '.join([mark] * 8)})")


def insert_values(kb: KnowledgeBase, entry: dict[str, Any],
                  embedding: np.ndarray | None) -> tuple[Any, ...]:
    blob = None if embedding is None else np.asarray(embedding, dtype=np.float32).tobytes()
    return (kb.id, entry.get("time") or now(),
            entry.get("question") or entry.get("question_hash") or "",
            entry.get("status", ""), entry.get("path", ""), entry.get("embedder", ""),
            blob, json.dumps(entry, ensure_ascii=False))


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
