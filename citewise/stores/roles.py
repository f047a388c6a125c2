"""What a store does, one protocol per role, each with the behaviour every backend keeps in its
docstring and one conformance class in ``citewise.testing`` that pins it. ``Store`` combines
them: it is the type the engine takes. ``SQLStore`` (``sql.py``) implements all of them on
SQLite, MySQL/MariaDB and PostgreSQL; the tenants role is ``store.tenants``
(``tenancy.Tenants``), the jobs role ``store.jobs``.

Shared by every role: every read and write is scoped to one knowledge base inside the query
itself (nothing of another is fetched and filtered out afterwards); chunk keys are
store-internal integers, chunk ids (content hashes) are what users see.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from citewise.kb import KBConfig, KnowledgeBase
from citewise.records import Chunk, Document
from citewise.stores.base import DenseIndex, DocumentInfo, LogEntry, PutResult
from citewise.stores.job_rows import Job, JobFile
from citewise.stores.kb_cache import KBCache
from citewise.stores.sentence_rows import SentenceVectors
from citewise.tenancy import Tenants

if TYPE_CHECKING:  # ratelimit imports stores.urls
    from citewise.ratelimit import Decision


class Content(Protocol):
    """Knowledge bases and their documents.

    Knowledge-base names are unique per tenant (``tenant`` 0: the operator's own); every
    method that takes a name reads only that tenant's. ``put_document`` writes a document,
    its chunks, their vectors and keyword rows in one transaction, and the chunks' sentence
    vectors when given (``sentences``, one entry or None per chunk). Unchanged content (same
    content hash) is a no-op returning ``"unchanged"``; changed content replaces all of the
    document's chunks and returns ``"replaced"``. A failure leaves the previous version whole.
    Replacing or deleting a document removes its chunks' sentence vectors in the same
    transaction. ``count_chunks`` is cached until the knowledge base is written again.
    """

    def create_kb(self, name: str, config: KBConfig, tenant: int = 0) -> KnowledgeBase:
        """``AlreadyExistsError`` if the tenant has that name (of two at once, one wins)."""
        ...

    def get_kb(self, name: str, tenant: int = 0) -> KnowledgeBase: ...
    def list_kbs(self, tenant: int = 0) -> list[KnowledgeBase]: ...
    def update_kb(self, name: str, config: KBConfig, tenant: int = 0) -> KnowledgeBase: ...

    def delete_kb(self, name: str, tenant: int = 0) -> None:
        """The knowledge base with everything of it: documents, log, shadow vectors."""
        ...

    def document_hash(self, kb: KnowledgeBase, doc_id: str) -> str | None: ...
    def put_document(
        self, kb: KnowledgeBase, doc: Document, chunks: list[Chunk], vectors: np.ndarray,
        sentences: Sequence[SentenceVectors | None] | None = None,
    ) -> PutResult: ...
    def delete_document(self, kb: KnowledgeBase, doc_id: str) -> bool: ...
    def list_documents(self, kb: KnowledgeBase) -> list[DocumentInfo]: ...
    def count_chunks(self, kb: KnowledgeBase) -> int: ...


class Search(Protocol):
    """Dense and keyword retrieval over one knowledge base, and its chunks.

    ``dense_index`` returns every vector of the knowledge base as one matrix, cached until the
    knowledge base is written again (a version counter bumped in each write transaction).
    ``dense_search`` returns the chunk keys nearest a unit query vector, best first, with their
    exact cosines: a backend may find them approximately (an HNSW index over a large
    knowledge base) but the cosines are always computed from the stored vectors, since the
    gate reads them. ``vectors`` returns stored vectors of given keys (another knowledge
    base's key: ``StoreError``). ``document_chunks`` returns one document's chunks in their
    order (none for another knowledge base's document).

    ``keyword`` returns BM25-ranked chunk keys (best first) for an OR of the given terms. With
    ``within``, only chunks holding at least one of those terms are ranked, each by the same
    score it has without ``within`` (all of ``terms`` count; ``citewise/search/keywords.py`` uses this
    to skip the chunks that hold only common words). ``term_counts`` counts, for each term,
    this knowledge base's chunks holding it (as ``keyword`` would match it), stopping at
    ``cap``: a count of ``cap`` means "at least"; the cost is bounded by ``cap`` per term, and
    counts are cached until the knowledge base's version changes.

    ``keyword_in_memory`` tells whether ``keyword`` of a knowledge base is served by an index
    the process keeps (BM25 with this knowledge base's statistics, built from the store and
    rebuilt when the version changes); when it is, every term costs the same and
    ``citewise/search/keywords.py`` leaves the question's words as they are.

    ``pinned`` holds one knowledge base's version for the calls of one question: inside it,
    this thread's reads of that knowledge base see the version read when it was entered
    (so a question reads it once, not once per call), and another worker's write is seen by
    the next question; a write through the store itself ends the pin.
    """

    def dense_index(self, kb: KnowledgeBase) -> DenseIndex: ...
    def dense_search(self, kb: KnowledgeBase, query: np.ndarray, k: int
                     ) -> tuple[np.ndarray, np.ndarray]: ...
    def vectors(self, kb: KnowledgeBase, keys: list[int]) -> np.ndarray: ...
    def keyword(self, kb: KnowledgeBase, terms: list[str], k: int,
                within: list[str] | None = None) -> list[tuple[int, float]]: ...
    def term_counts(self, kb: KnowledgeBase, terms: list[str], cap: int) -> dict[str, int]: ...
    def keyword_in_memory(self, kb: KnowledgeBase) -> bool: ...
    def chunks(self, kb: KnowledgeBase, keys: list[int]) -> dict[int, Chunk]: ...
    def chunk_by_id(self, kb: KnowledgeBase, chunk_id: str) -> Chunk | None: ...
    def document_chunks(self, kb: KnowledgeBase, doc_id: str) -> list[Chunk]: ...
    def pinned(self, kb: KnowledgeBase) -> AbstractContextManager[None]: ...

    def stem_sets(self, kb: KnowledgeBase, keys: list[int],
                  terms: Iterable[str]) -> list[frozenset[str]] | None:
        """Which of ``terms`` each of ``keys`` holds among the gate's stems
        (``sentences.stem_set``), in order, where the store keeps them with the chunks (its
        in-memory chunk table); None elsewhere."""
        ...

    def approximate(self, kb: KnowledgeBase) -> bool:
        """Whether ``dense_search`` of ``kb`` goes through an approximate index."""
        ...

    def prepare(self, kb: KnowledgeBase) -> None:
        """Load (or build) ``kb``'s dense index now rather than on its first search."""
        ...


class QueryLog(Protocol):
    """One entry per question asked of a knowledge base.

    ``log_query`` writes one entry (``embedding`` may be None) and keeps only the sha256 of a
    ``feedback_token``; ``query_log`` reads a knowledge base's entries oldest first,
    ``since``/``until`` being ISO-8601 UTC strings compared as text. ``add_feedback`` (by
    id, for operators) overwrites; on an id that is not this knowledge base's it raises
    ``QueryLogError`` with the same message whether the id is missing or another's.
    ``add_token_feedback`` finds the entry by the token's hash within the knowledge base (a
    wrong token, another knowledge base's or a missing one: the same ``QueryLogError``) and
    records the first feedback only: a second raises ``FeedbackGivenError`` and changes nothing.
    """

    def log_query(self, kb: KnowledgeBase, entry: dict[str, Any], embedding: np.ndarray | None,
                  feedback_token: str | None = None) -> int: ...
    def query_log(self, kb: KnowledgeBase, since: str | None = None, until: str | None = None,
                  embeddings: bool = False) -> list[LogEntry]: ...
    def add_feedback(self, kb: KnowledgeBase, query_id: int, helpful: bool, note: str = "") -> None: ...
    def add_token_feedback(self, kb: KnowledgeBase, token: str, helpful: bool,
                           note: str = "") -> int: ...
    def purge_query_log(self, kb: KnowledgeBase, before: str) -> int: ...


class Shadows(Protocol):
    """Another embedder's vectors beside the live ones (``citewise replay``).

    ``put_shadow_vectors`` stores them without touching the live ones; ``switch_vectors``
    replaces every live vector with its shadow and the configuration in one transaction, or
    raises ``QueryLogError`` and changes nothing when a chunk has no shadow vector from that
    embedder for its current content (key and chunk id both match). Switching drops the
    knowledge base's sentence vectors and its shadow vectors.
    """

    def put_shadow_vectors(self, kb: KnowledgeBase, embedder: str, keys: list[int],
                           chunk_ids: list[str], vectors: np.ndarray) -> None: ...
    def shadow_index(self, kb: KnowledgeBase, embedder: str, dim: int) -> DenseIndex: ...
    def drop_shadow(self, kb: KnowledgeBase) -> None: ...
    def switch_vectors(self, kb: KnowledgeBase, config: KBConfig) -> KnowledgeBase: ...


class Sentences(Protocol):
    """Each chunk's sentence vectors (``sentence_rows.py``), read by the citation check.

    ``sentence_vectors`` returns those of given chunk ids of one knowledge base, in one
    statement; chunks stored without them are simply absent. ``chunks_without_sentences``
    lists the keys of those (above ``after``, ascending) and ``put_sentence_vectors`` adds
    rows for them, skipping a chunk no longer stored with that id.
    """

    def sentence_vectors(self, kb: KnowledgeBase, chunk_ids: list[str]
                         ) -> dict[str, SentenceVectors]: ...
    def chunks_without_sentences(self, kb: KnowledgeBase, after: int, limit: int) -> list[int]: ...
    def put_sentence_vectors(self, kb: KnowledgeBase,
                             rows: list[tuple[int, str, SentenceVectors]]) -> None: ...


class Jobs(Protocol):
    """Ingestion jobs of the HTTP service and the console (``job_rows.py``): ``store.jobs``.

    ``create_job`` stores a queued job with its files (bytes to ingest, or a result already),
    in upload order, under a random public id. ``get_job`` reads one within a tenant: another
    tenant's job, or an id that is not one, is None. ``claim`` makes a runner the job's runner
    (state running) for a lease of seconds, atomically and only if the job is queued, or its
    lease ran out, or it is that runner's already; ``renew`` extends the lease while the runner
    holds the job, and ``release`` queues a stopping runner's jobs again. ``claimable`` lists
    the jobs a runner may claim (the operator's or the tenants'). ``record_file`` stores a
    file's result and drops its bytes, and ``finish`` marks the job done or failed (dropping
    the bytes of files never run); both write nothing and return False when that runner no
    longer holds the job. ``unfinished_jobs`` lists the jobs queued or running, oldest first.
    """

    def create_job(self, tenant: int, kb: str, files: Iterable[JobFile]) -> Job: ...
    def get_job(self, public_id: str, tenant: int) -> Job | None: ...
    def unfinished_jobs(self) -> list[Job]: ...
    def claimable(self, operator: bool) -> list[tuple[str, int]]: ...
    def claim(self, public_id: str, runner: str, lease_s: float = ...) -> bool: ...
    def renew(self, public_id: str, runner: str, lease_s: float) -> bool: ...
    def release(self, runner: str) -> None: ...
    def pending_files(self, public_id: str) -> list[tuple[int, str]]: ...
    def file_content(self, public_id: str, ordinal: int) -> bytes | None: ...
    def record_file(self, public_id: str, runner: str, ordinal: int,
                    result: dict[str, Any]) -> bool: ...
    def finish(self, public_id: str, runner: str, error: str | None = None) -> bool: ...


class Answering(Protocol):
    """What one question reads, and all the answer path may call (``search/``, the gate's
    reads in ``Engine.decide``, ``answer/sentence_vectors.py``): the narrow store of the answer
    path, each method as its role above says. Ingestion, the query log, tenants, jobs and rates
    are other roles; a ``Store`` is an ``Answering``."""

    def pinned(self, kb: KnowledgeBase) -> AbstractContextManager[None]: ...
    def dense_search(self, kb: KnowledgeBase, query: np.ndarray, k: int
                     ) -> tuple[np.ndarray, np.ndarray]: ...
    def vectors(self, kb: KnowledgeBase, keys: list[int]) -> np.ndarray: ...
    def keyword(self, kb: KnowledgeBase, terms: list[str], k: int,
                within: list[str] | None = None) -> list[tuple[int, float]]: ...
    def keyword_in_memory(self, kb: KnowledgeBase) -> bool: ...
    def count_chunks(self, kb: KnowledgeBase) -> int: ...
    def term_counts(self, kb: KnowledgeBase, terms: list[str], cap: int) -> dict[str, int]: ...
    def chunks(self, kb: KnowledgeBase, keys: list[int]) -> dict[int, Chunk]: ...
    def stem_sets(self, kb: KnowledgeBase, keys: list[int],
                  terms: Iterable[str]) -> list[frozenset[str]] | None: ...
    def sentence_vectors(self, kb: KnowledgeBase, chunk_ids: list[str]
                         ) -> dict[str, SentenceVectors]: ...


class Knowledge(Content, Search, QueryLog, Shadows, Sentences, Protocol):
    """The knowledge bases and what is kept of them: every role the engine uses (``Engine``
    takes this; one question's part of it is ``Answering``)."""


class Store(Knowledge, Protocol):
    """``Knowledge`` and what the HTTP service keeps beside it, in roles of their own: its
    tenants and keys (``tenants``), ingestion jobs (``jobs``), request rates (``take_rate``);
    and the store's name and life cycle. ``cache`` is what it keeps of knowledge bases between
    searches (shared by the stores a process opens on one database with
    ``open_store(url, cache=...)``)."""

    url: str
    cache: KBCache
    tenants: Tenants
    jobs: Jobs

    def migrate(self) -> list[str]:
        """Apply the schema migrations not yet applied (opening a store does); their names."""
        ...

    def take_rate(self, name: str, rate_per_minute: int, now: int | None = None) -> Decision:
        """One request of an API key against its rate window kept in the store
        (``ratelimit.RateWindows.take``)."""
        ...

    def close(self) -> None: ...
