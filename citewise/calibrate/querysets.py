"""Labelled query sets: citewise JSONL, or BEIR ``queries.jsonl`` with a qrels TSV.

citewise JSONL, one object a line::

    {"id": "t001", "query": "...", "expect": "answer" | "refuse",
     "sources": ["doc ids"], "bucket": "covered" | "thin" | "out_of_scope"}

``sources`` may be empty for ``refuse``; other keys are ignored here (the sample's covered
questions carry ``must_contain``, the short strings of their key facts, which
``benchmarks/key_facts.py`` looks for in the answers). A BEIR query has no ``expect``; its
relevant documents (and grades) come from the qrels file, and only queries that have qrels are
kept.
"""

from __future__ import annotations

import csv
import json
from dataclasses import dataclass, field
from pathlib import Path

from citewise.errors import QueryError

BUCKETS = ("covered", "thin", "out_of_scope")


@dataclass(frozen=True)
class LabelledQuery:
    id: str
    query: str
    relevant: dict[str, int] = field(default_factory=dict, hash=False)  # doc id -> grade
    expect: str | None = None  # "answer" | "refuse" | None (BEIR)
    bucket: str | None = None


def read_qrels(path: Path) -> dict[str, dict[str, int]]:
    """BEIR qrels: ``query-id<TAB>corpus-id<TAB>score`` with a header line (CRLF allowed)."""
    qrels: dict[str, dict[str, int]] = {}
    try:
        with path.open(encoding="utf-8", newline="") as f:
            for number, row in enumerate(csv.reader(f, delimiter="\t"), 1):
                if not row or (number == 1 and not row[-1].strip().lstrip("-").isdigit()):
                    continue
                if len(row) < 3:
                    raise QueryError(f"{path}:{number}: expected 3 tab-separated columns")
                qrels.setdefault(row[0].strip(), {})[row[1].strip()] = int(row[2])
    except OSError as e:
        raise QueryError(f"Cannot read qrels {path}: {e.strerror}") from None
    except ValueError:
        raise QueryError(f"{path}: the score column must be a whole number") from None
    return qrels


def _parse(path: Path, number: int, line: str) -> dict[str, object]:
    try:
        row = json.loads(line)
    except json.JSONDecodeError as e:
        raise QueryError(f"{path}:{number}: not JSON ({e.msg})") from None
    if not isinstance(row, dict):
        raise QueryError(f"{path}:{number}: each line must be a JSON object")
    return row


def load_queries(path: Path, qrels: Path | None = None) -> list[LabelledQuery]:
    """Read a query set; BEIR when ``qrels`` is given (or lines have ``_id`` and ``text``)."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as e:
        raise QueryError(f"Cannot read query file {path}: {e.strerror}") from None
    judged = read_qrels(qrels) if qrels else None
    out: list[LabelledQuery] = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        row = _parse(path, number, line)
        if "_id" in row and "text" in row:
            qid = str(row["_id"])
            if judged is None:
                raise QueryError(f"{path} is a BEIR query file; give its relevance file with --qrels")
            if qid in judged:
                out.append(LabelledQuery(qid, str(row["text"]), judged[qid]))
            continue
        missing = [k for k in ("id", "query", "expect") if k not in row]
        if missing:
            raise QueryError(f"{path}:{number}: missing {', '.join(missing)}")
        expect, bucket = row["expect"], row.get("bucket")
        if expect not in ("answer", "refuse"):
            raise QueryError(f"{path}:{number}: expect must be \"answer\" or \"refuse\"")
        if bucket is not None and bucket not in BUCKETS:
            raise QueryError(f"{path}:{number}: bucket must be one of {', '.join(BUCKETS)}")
        sources = row.get("sources") or []
        if not isinstance(sources, list) or not all(isinstance(x, str) and x for x in sources):
            # a bare string would be read as its letters, each a "source"
            raise QueryError(f"{path}:{number}: sources must be a list of document ids, "
                             "e.g. [\"varenicline.md\"]")
        if expect == "answer" and not sources:
            raise QueryError(f"{path}:{number}: an \"answer\" query needs its sources")
        out.append(LabelledQuery(str(row["id"]), str(row["query"]), {str(s): 1 for s in sources},
                                 str(expect), str(bucket) if bucket else None))
    if not out:
        raise QueryError(f"{path}: no queries found")
    return out
