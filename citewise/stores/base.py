"""The records stores hand out (documents, dense indexes, log entries) and the small pieces
every backend shares: per-term counts kept per version, top-k selection, the tables a
knowledge base's rows live in. The protocols of the store's roles are in ``roles.py``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from citewise.errors import StoreError

PutResult = Literal["added", "replaced", "unchanged"]


@dataclass(frozen=True)
class DocumentInfo:
    doc_id: str
    title: str
    source: str
    content_hash: str
    chunks: int
    ingested_at: str


@dataclass(frozen=True)
class DenseIndex:
    """All vectors of one knowledge base: row ``i`` of ``matrix`` belongs to ``keys[i]``."""

    keys: np.ndarray  # int64, ascending
    matrix: np.ndarray  # float32, L2-normalised rows
    version: int

    @property
    def nbytes(self) -> int:
        return int(self.keys.nbytes + self.matrix.nbytes)

    def rows(self, keys: list[int]) -> np.ndarray:
        """The vectors of ``keys``, in that order (keys must be in the index)."""
        return self.matrix[np.searchsorted(self.keys, np.asarray(keys, dtype=np.int64))]

    def take(self, keys: list[int], kb_name: str) -> np.ndarray:
        """The vectors of ``keys``; a key not in this knowledge base is an error."""
        if not keys:
            return np.zeros((0, self.matrix.shape[1]), np.float32)
        at = np.searchsorted(self.keys, np.asarray(keys, dtype=np.int64))
        if at.max() >= len(self.keys) or (self.keys[at] != keys).any():
            raise StoreError(f"chunk keys not in knowledge base {kb_name!r}")
        return self.matrix[at]

    def search(self, query: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """Exact ``dense_search``: the keys of the ``k`` highest cosines and the cosines."""
        if not len(self.keys):
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32)
        scores = self.matrix @ query
        top = top_k(scores, k)
        return self.keys[top], scores[top]


# every table holding a knowledge base's rows by kb_id, emptied when it is deleted
KB_TABLES = ("chunk_sentences", "chunks", "documents", "query_log", "shadow_vectors")


class TermCounts:
    """Capped per-term chunk counts of each knowledge base, kept for one version of it.

    A count below its cap is exact and answers any cap; one at its cap answers only caps up
    to it. At most ``limit`` terms are kept per knowledge base (all dropped when full).
    """

    def __init__(self, limit: int = 50_000) -> None:
        self.limit = limit
        self._kbs: dict[int, tuple[int, dict[str, tuple[int, int]]]] = {}

    def get(self, kb_id: int, version: int, terms: list[str], cap: int,
            count: Callable[[str, int], int]) -> dict[str, int]:
        """``{term: min(count, cap)}``, calling ``count(term, cap)`` for the terms not known."""
        seen = self._kbs.get(kb_id)
        if seen is None or seen[0] != version or len(seen[1]) > self.limit:
            seen = (version, {})
            self._kbs[kb_id] = seen
        known = seen[1]
        out = {}
        for term in dict.fromkeys(terms):
            n, at_cap = known.get(term, (0, -1))
            if not (n < at_cap or cap <= at_cap):
                n, at_cap = count(term, cap), cap
                known[term] = (n, at_cap)
            out[term] = min(n, cap)
        return out

    def forget(self, kb_id: int) -> None:
        self._kbs.pop(kb_id, None)


def top_k(scores: np.ndarray, k: int) -> np.ndarray:
    """Indices of the ``k`` highest scores, best first (ties in index order)."""
    k = min(k, len(scores))
    if k <= 0:
        return np.zeros(0, dtype=np.int64)
    top = np.argpartition(-scores, k - 1)[:k]
    return top[np.lexsort((top, -scores[top]))]


@dataclass(frozen=True)
class LogEntry:
    """One logged question. ``question`` is the text, or ``hmac-sha256:<hex>`` when hashed."""

    id: int
    created_at: str
    question: str
    status: str
    path: str
    embedder: str
    record: dict[str, Any]
    embedding: np.ndarray | None = None
    feedback: bool | None = None
    feedback_note: str = ""
    feedback_at: str = ""
