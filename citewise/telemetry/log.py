"""What one question leaves in the query log, and the log's export to JSONL and Parquet.

A log record (``query_log.record``, JSON; ``"v": 2``) holds::

    {"v": 2, "time": ISO-8601 UTC, "kb": name, "question": str | null,
     "question_hash": "hmac-sha256:<hex>" | null, "embedder": spec, "generator": spec | null,
     "asked": str | null, "asked_hash": str | null,   # a follow-up as asked, when "question"
                                                      # is it made standalone; else null
     "status": "answered" | "refused",
     "path": "answered" | "gate" | "citation_check" | "generation_failed",
     "reason": str | null, "answer": str | null, "citations": [...],
     "dropped": [{"sentence", "reason"}],   # older records: ["sentence (reason)"]
     "related": [...], "uncovered": [...], "warnings": [...],
     "candidates": [{"doc_id", "chunk_id", "section", "cosine", "bm25", "rrf",
                     "dense_rank", "bm25_rank", "in_context"}],   # every fused candidate
     "gate": {"policy", "signal", "threshold", "answer", "reason",
              "signals": {"top1", "mean", "n_context", "coverage", "pool", "margin",
                          "sentence_terms", "sentence_cosine", "agreement", "kb_terms",
                          "answerable"},
                          # older records hold the first four only, or lack the last ones
              "parts": [{"question", "answer", "signal"}]},
     "timings": {"embed_ms", "dense_ms", "bm25_ms", "fuse_ms", "gate_ms", "generate_ms", "check_ms",
                 "total_ms"}}

Feedback lives in the row's own columns (``feedback``, ``feedback_note``, ``feedback_at``) and
is merged into exports. Chunk texts are not copied into the log (the chunk ids point at them),
except the quotes of the citations an answer showed.

Hashed questions: with ``LogPolicy.hash_questions`` the question is replaced by
``HMAC-SHA256(key, question)`` in hex, the key being ``CITEWISE_LOG_SALT`` when set, else the
random per-knowledge-base salt made when hashing was switched on. The same question always
gets the same hash (repeats can be counted); with the key kept outside the store, a reader of
the store cannot test guesses. The query embedding is still kept unless ``keep_embeddings`` is
off: a vector can be matched against candidate questions and so leaks what was asked.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import secrets
from collections.abc import Iterable, Sequence
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np

from citewise.answer import plain
from citewise.errors import ConfigError, QueryLogError
from citewise.kb import KnowledgeBase, LogPolicy
from citewise.output import to_dict
from citewise.records import Answer, Candidate, Refusal, Signals
from citewise.stores.base import LogEntry
from citewise.stores.roles import QueryLog

SALT_ENV = "CITEWISE_LOG_SALT"
HASH_PREFIX = "hmac-sha256:"
RECORD_VERSION = 2
SIGNAL_KEYS = ("top1", "mean", "coverage", "pool", "margin", "sentence_terms", "sentence_cosine",
               "agreement", "kb_terms", "answerable")


def question_digest(question: str, policy: LogPolicy) -> str:
    key = os.environ.get(SALT_ENV) or policy.salt
    if not key:
        raise ConfigError("Hashed questions need a key: set CITEWISE_LOG_SALT or a policy salt")
    digest = hmac.new(key.encode(), question.encode(), hashlib.sha256).hexdigest()
    return HASH_PREFIX + digest


def with_policy(policy: LogPolicy, retention_days: int | None = None,
                hash_questions: bool | None = None, keep_embeddings: bool | None = None,
                clear_retention: bool = False) -> LogPolicy:
    """A new policy with the given changes; switching hashing on makes a salt if there is none."""
    if retention_days is not None and retention_days < 1:
        raise ConfigError("retention must be at least 1 day")
    changes: dict[str, Any] = {}
    if retention_days is not None or clear_retention:
        changes["retention_days"] = None if clear_retention else retention_days
    if hash_questions is not None:
        changes["hash_questions"] = hash_questions
        if hash_questions and not policy.salt:
            changes["salt"] = secrets.token_hex(16)
    if keep_embeddings is not None:
        changes["keep_embeddings"] = keep_embeddings
    return replace(policy, **changes)


def candidate_dict(c: Candidate, in_context: bool) -> dict[str, Any]:
    return {"doc_id": c.chunk.doc_id, "chunk_id": c.chunk.id, "section": c.chunk.heading,
            "cosine": round(c.cosine, 4), "bm25": round(c.bm25, 4), "rrf": round(c.rrf, 6),
            "dense_rank": c.dense_rank, "bm25_rank": c.bm25_rank, "in_context": in_context}


def build_record(kb: KnowledgeBase, result: Answer | Refusal, candidates: Sequence[Candidate],
                 context: Sequence[Candidate], signals: Signals, generator: str | None,
                 now: datetime | None = None) -> dict[str, Any]:
    """The JSON record of one question (module docstring), question hashed if the policy says."""
    shown = to_dict(result)
    in_context = {c.chunk.id for c in context}
    policy = kb.config.log
    d = result.decision
    searched = result.standalone or result.question  # what the gate read
    asked = result.question if result.standalone else None
    hashed = policy.hash_questions
    record: dict[str, Any] = {
        "v": RECORD_VERSION,
        "time": (now or datetime.now(UTC)).isoformat(timespec="seconds"),
        "kb": kb.name,
        "question": None if hashed else searched,
        "question_hash": question_digest(searched, policy) if hashed else None,
        "asked": None if hashed else asked,
        "asked_hash": question_digest(asked, policy) if hashed and asked else None,
        "embedder": kb.config.embedder,
        "generator": generator,
        "candidates": [candidate_dict(c, c.chunk.id in in_context) for c in candidates],
        "gate": {"policy": d.policy, "signal": round(d.signal, 4), "threshold": round(d.threshold, 4),
                 "answer": d.answer, "reason": d.reason,
                 "signals": {"n_context": signals.n_context,
                             **{k: round(getattr(signals, k), 4) for k in SIGNAL_KEYS}},
                 "parts": shown["gate"]["parts"]},
    }
    for key in ("status", "path", "reason", "answer", "citations", "dropped", "related",
                "uncovered", "warnings", "timings"):
        record[key] = shown[key]
    if hashed and result.uncovered:  # the parts are the question's words: hashed like it
        note = plain.uncovered(result.uncovered)
        record["answer"] = (record["answer"] or "").removesuffix(" " + note) or None
        record["uncovered"] = [question_digest(p, policy) for p in result.uncovered]
    if hashed:
        for part in record["gate"]["parts"]:
            part["question"] = question_digest(part["question"], policy)
    return record


def new_feedback_token() -> str:
    """The random token an answer carries for its feedback: 192 bits, URL-safe."""
    return secrets.token_urlsafe(24)


def write(store: QueryLog, kb: KnowledgeBase, record: dict[str, Any], qvec: np.ndarray,
          feedback_token: str | None = None) -> int:
    """Store one record and apply retention. When hashed, the question column holds the hash
    (the record's ``question`` stays null), so the text is nowhere in the store. The feedback
    token is kept as its sha256 only, beside the record, never in it."""
    policy = kb.config.log
    log_id = store.log_query(kb, record, qvec if policy.keep_embeddings else None,
                             feedback_token)
    if policy.retention_days:
        cutoff = datetime.now(UTC) - timedelta(days=policy.retention_days)
        store.purge_query_log(kb, cutoff.isoformat(timespec="seconds"))
    return log_id


def iso(value: str | datetime | None) -> str | None:
    """A user's time (ISO date or date-time, or a datetime) as the log's UTC text form."""
    if value is None or value == "":
        return None
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value)
        except ValueError:
            raise QueryLogError(f"Not an ISO date or date-time: {value!r} (e.g. 2026-11-30)") from None
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return value.astimezone(UTC).isoformat(timespec="seconds")


def flat(entry: LogEntry) -> dict[str, Any]:
    """One entry as an export row: the record plus id, feedback and the embedding as a list."""
    row = dict(entry.record)
    row.update(id=entry.id, time=entry.created_at, feedback=entry.feedback,
               feedback_note=entry.feedback_note or None, feedback_at=entry.feedback_at or None,
               embedding=None if entry.embedding is None else [float(x) for x in entry.embedding])
    return row


def export_jsonl(entries: Iterable[LogEntry], path: Path) -> int:
    n = 0
    with path.open("w", encoding="utf-8") as f:
        for e in entries:
            f.write(json.dumps(flat(e), ensure_ascii=False) + "\n")
            n += 1
    return n


PARQUET_JSON_COLUMNS = ("citations", "candidates", "gate", "timings", "dropped", "related",
                        "warnings")


def export_parquet(entries: Iterable[LogEntry], path: Path) -> int:
    """Flat columns for analysis (signals and timings as their own columns); nested parts as
    JSON text; the embedding as a list of float32."""
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        raise ConfigError("Parquet export needs pyarrow: pip install 'citewise[parquet]'") from None
    rows = []
    for e in entries:
        r = flat(e)
        signals = r.get("gate", {}).get("signals", {})
        timings = r.get("timings", {})
        out = {k: r.get(k) for k in ("id", "time", "kb", "question", "question_hash", "embedder",
                                     "generator", "status", "path", "reason", "answer",
                                     "feedback", "feedback_note", "feedback_at")}
        out.update(top1=signals.get("top1"), mean_cosine=signals.get("mean"),
                   n_context=signals.get("n_context"),
                   threshold=r.get("gate", {}).get("threshold"),
                   total_ms=timings.get("total_ms"))
        out.update({k: json.dumps(r.get(k), ensure_ascii=False) for k in PARQUET_JSON_COLUMNS})
        out["embedding"] = r["embedding"]
        rows.append(out)
    schema = pa.schema(
        [(k, pa.int64()) for k in ("id",)]
        + [(k, pa.string()) for k in ("time", "kb", "question", "question_hash", "embedder",
                                      "generator", "status", "path", "reason", "answer")]
        + [("feedback", pa.bool_()), ("feedback_note", pa.string()), ("feedback_at", pa.string()),
           ("top1", pa.float64()), ("mean_cosine", pa.float64()), ("n_context", pa.int64()),
           ("threshold", pa.float64()), ("total_ms", pa.float64())]
        + [(k, pa.string()) for k in PARQUET_JSON_COLUMNS]
        + [("embedding", pa.list_(pa.float32()))]
    )
    pq.write_table(pa.Table.from_pylist(rows, schema=schema), path)
    return len(rows)
