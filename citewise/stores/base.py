"""The store protocol: knowledge bases, documents, chunks with vectors, keywords, query log.

Behaviour every backend keeps (the conformance tests in ``tests/store_conformance.py`` pin it):

- Every read and write is scoped to one knowledge base inside the query itself; nothing from
  another knowledge base is fetched and filtered out afterwards.
- ``put_document`` writes a document, its chunks, their vectors and keyword rows in one
  transaction, and the chunks' sentence vectors when given (``sentences``, one entry or None
  per chunk). Unchanged content (same content hash) is a no-op returning ``"unchanged"``;
  changed content replaces all of the document's chunks and returns ``"replaced"``. A failure
  leaves the previous version whole. Replacing or deleting a document removes its chunks'
  sentence vectors in the same transaction.
- ``dense_index`` returns every vector of the knowledge base as one matrix, cached until the
  knowledge base is written again (a version counter bumped in each write transaction).
- ``dense_search`` returns the chunk keys nearest a unit query vector, best first, with their
  exact cosines. A backend may find them approximately (an HNSW index over a large knowledge
  base) but the cosines it returns are always computed from the stored vectors, since the
  gate reads them. ``vectors`` returns stored vectors of given keys of one knowledge base.
- ``sentence_vectors`` returns the stored sentence vectors of given chunk ids of one knowledge
  base, in one statement; chunks stored without them are simply absent.
  ``chunks_without_sentences`` lists the keys of those (above ``after``, ascending) and
  ``put_sentence_vectors`` adds rows for them, skipping a chunk no longer stored with that id.
- ``keyword`` returns BM25-ranked chunk keys (best first) for an OR of the given terms. With
  ``within``, only chunks holding at least one of those terms are ranked, each by the same
  score it has without ``within`` (all of ``terms`` count; ``citewise/keywords.py`` uses this
  to skip the chunks that hold only common words).
- ``term_counts`` counts, for each term, this knowledge base's chunks holding it (as
  ``keyword`` would match it), stopping at ``cap``: a count of ``cap`` means "at least". The
  cost is bounded by ``cap`` per term, and counts are cached until the knowledge base's
  version changes. ``count_chunks`` is cached the same way.
- Chunk keys are store-internal integers; chunk ids (content hashes) are what users see.
- The query log: ``log_query`` writes one entry (``embedding`` may be None); ``query_log``
  reads a knowledge base's entries oldest first, ``since``/``until`` being ISO-8601 UTC strings
  compared as text; ``add_feedback`` on an id that is not this knowledge base's raises
  ``QueryLogError`` with the same message whether the id is missing or another's.
  ``log_query`` given a ``feedback_token`` keeps only its sha256; ``add_token_feedback``
  finds the entry by that hash within the knowledge base (a wrong token, another knowledge
  base's or a missing one: the same ``QueryLogError``) and records the first feedback only:
  a second raises ``FeedbackGivenError`` and changes nothing. ``add_feedback`` (by id, for
  operators) overwrites.
- Shadow vectors (``citewise replay``): ``put_shadow_vectors`` stores a new embedder's vectors
  beside the live ones without touching them; ``switch_vectors`` replaces every live vector
  with its shadow and the configuration in one transaction, or raises ``QueryLogError``
  and changes nothing when a chunk has no shadow vector from that embedder for its current
  content (key and chunk id both match). Switching drops the knowledge base's sentence vectors.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol

import numpy as np

from ..errors import StoreError
from ..kb import KBConfig, KnowledgeBase
from ..records import Chunk, Document
from .sentence_rows import SentenceVectors

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


class Store(Protocol):
    url: str

    def create_kb(self, name: str, config: KBConfig) -> KnowledgeBase: ...
    def get_kb(self, name: str) -> KnowledgeBase: ...
    def list_kbs(self) -> list[KnowledgeBase]: ...
    def update_kb(self, name: str, config: KBConfig) -> KnowledgeBase: ...
    def delete_kb(self, name: str) -> None: ...

    def document_hash(self, kb: KnowledgeBase, doc_id: str) -> str | None: ...
    def put_document(
        self, kb: KnowledgeBase, doc: Document, chunks: list[Chunk], vectors: np.ndarray,
        sentences: Sequence[SentenceVectors | None] | None = None,
    ) -> PutResult: ...
    def delete_document(self, kb: KnowledgeBase, doc_id: str) -> bool: ...
    def list_documents(self, kb: KnowledgeBase) -> list[DocumentInfo]: ...
    def count_chunks(self, kb: KnowledgeBase) -> int: ...

    def dense_index(self, kb: KnowledgeBase) -> DenseIndex: ...
    def dense_search(
        self, kb: KnowledgeBase, query: np.ndarray, k: int
    ) -> tuple[np.ndarray, np.ndarray]: ...
    def vectors(self, kb: KnowledgeBase, keys: list[int]) -> np.ndarray: ...
    def keyword(self, kb: KnowledgeBase, terms: list[str], k: int,
                within: list[str] | None = None) -> list[tuple[int, float]]: ...
    def term_counts(self, kb: KnowledgeBase, terms: list[str], cap: int) -> dict[str, int]: ...
    def chunks(self, kb: KnowledgeBase, keys: list[int]) -> dict[int, Chunk]: ...
    def chunk_by_id(self, kb: KnowledgeBase, chunk_id: str) -> Chunk | None: ...
    def sentence_vectors(self, kb: KnowledgeBase, chunk_ids: list[str]) -> dict[str, SentenceVectors]: ...
    def chunks_without_sentences(self, kb: KnowledgeBase, after: int, limit: int) -> list[int]: ...
    def put_sentence_vectors(
        self, kb: KnowledgeBase, rows: list[tuple[int, str, SentenceVectors]]
    ) -> None: ...

    def log_query(
        self, kb: KnowledgeBase, entry: dict[str, Any], embedding: np.ndarray | None,
        feedback_token: str | None = None,
    ) -> int: ...
    def query_log(
        self, kb: KnowledgeBase, since: str | None = None, until: str | None = None,
        embeddings: bool = False,
    ) -> list[LogEntry]: ...
    def add_feedback(self, kb: KnowledgeBase, query_id: int, helpful: bool, note: str = "") -> None: ...
    def add_token_feedback(self, kb: KnowledgeBase, token: str, helpful: bool,
                           note: str = "") -> int: ...
    def purge_query_log(self, kb: KnowledgeBase, before: str) -> int: ...

    def put_shadow_vectors(
        self, kb: KnowledgeBase, embedder: str, keys: list[int], chunk_ids: list[str],
        vectors: np.ndarray,
    ) -> None: ...
    def shadow_index(self, kb: KnowledgeBase, embedder: str, dim: int) -> DenseIndex: ...
    def drop_shadow(self, kb: KnowledgeBase) -> None: ...
    def switch_vectors(self, kb: KnowledgeBase, config: KBConfig) -> KnowledgeBase: ...
    def close(self) -> None: ...
