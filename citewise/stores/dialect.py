"""What differs between the SQL databases a ``SQLStore`` runs on, one small object per backend
(``sqlite.py``, ``mysql.py``, ``postgres.py``); everything else is written once.

Every statement is written with ``%s`` placeholders (the drivers of MySQL and PostgreSQL take
them; SQLite's cursors turn them into ``?``). A dialect supplies:

- the connection and its transactions: ``connect``, ``alive``, ``begin`` (a write transaction,
  or a read snapshot with ``write=False``), ``cursor`` for reads, the driver's ``errors``,
  ``around_migrations`` (a server-wide lock) and ``schema`` for their text;
- insert ids (``insert_id``), the chunk key column (``key``), the row lock (``lock``);
- the chunk rows with their vectors and keyword rows (``insert_chunks``, ``drop_rows``), the
  keyword search and its term counts (``keyword``, ``term_count``), and how a vector is
  written and read back (``vector_value``, ``matrix``);
- the upsert that claims a rate window's row (``claim_rate``);
- ``clock``: the database's own time in seconds since the epoch, the one clock by which every
  process reads the ingestion jobs' leases (``job_rows.py``), whatever its host's clock says;
- ``ann``: the approximate-search hooks (an ``Ann``), or None where dense search is always exact.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from citewise.kb import KnowledgeBase
from citewise.records import Chunk

if TYPE_CHECKING:
    from citewise.stores.database import Database

Read = Callable[[str, tuple[Any, ...]], list[tuple[Any, ...]]]


class Ann(Protocol):
    """Approximate dense search for knowledge bases of at least ``ann_min_chunks`` chunks. The
    hooks only propose candidates; their cosines are always computed from the stored vectors."""

    def usable(self, kb: KnowledgeBase) -> bool:
        """Whether ``kb`` can have an index at all (its dimension, the server's extensions)."""
        ...

    def tracks(self, kb: KnowledgeBase) -> bool:
        """Whether the next write of ``kb`` should say which chunk keys it removed."""
        ...

    def prepare(self, db: Database, kb: KnowledgeBase, version: int) -> None: ...

    def candidates(self, db: Database, kb: KnowledgeBase, version: int, query: np.ndarray,
                   k: int) -> tuple[np.ndarray, np.ndarray | None]:
        """Candidate keys, and their stored vectors when the search read them anyway."""
        ...

    def vectors(self, kb: KnowledgeBase, version: int, keys: list[int]) -> np.ndarray | None:
        """Exact vectors of ``keys`` if the index keeps them, else None (read from the store)."""
        ...

    def written(self, kb: KnowledgeBase, old_version: int, removed: list[int],
                added: list[tuple[int, str]], vectors: np.ndarray) -> None:
        """A committed write of ``kb`` (version ``old_version`` + 1 now)."""
        ...

    def drop(self, cur: Any, kb: KnowledgeBase) -> None:
        """Forget ``kb``'s index (deleted, or its vectors switched), inside the transaction."""
        ...

    def close(self, db: Database) -> None:
        """Save what this process changed, before the connection closes."""
        ...


class Dialect:
    """The defaults; each backend overrides what it does otherwise."""

    name = ""  # the key into MIGRATIONS
    url = ""  # what the store is called in messages (password redacted)
    key = "chunk_key"  # the chunk key column
    chunks_from = "chunks"  # the FROM of a read of chunks by key
    lock = " FOR UPDATE"  # held rows of a transaction's read
    errors: tuple[type[Exception], ...] = ()  # the driver's errors
    ann: Ann | None = None
    claim_rate = ("INSERT INTO rate_windows (name, booked_until) VALUES (%s, 0) "
                  "ON CONFLICT (name) DO NOTHING")
    clock: str  # an expression: the database's time now, in seconds since the epoch

    # -- the connection -------------------------------------------------------------------

    def connect(self) -> Any:
        raise NotImplementedError

    def alive(self, conn: Any) -> bool:
        """Whether the connection is still open (a failed statement may have closed it)."""
        return True

    def begin(self, conn: Any, write: bool = True) -> Any:
        """A cursor inside a new transaction (a consistent read with ``write=False``)."""
        raise NotImplementedError

    def cursor(self, conn: Any) -> Any:
        """A cursor for one autocommit read."""
        return conn.cursor()

    def commit(self, cur: Any) -> None:
        cur.execute("COMMIT")

    def rollback(self, cur: Any) -> None:
        with suppress(*self.errors):  # a lost connection: the server rolls back itself
            cur.execute("ROLLBACK")

    around_migrations: tuple[str, str] | None = None  # run before and after them, as a lock

    @contextmanager
    def migrating(self, conn: Any) -> Iterator[None]:
        """Held around a run of migrations (``around_migrations``)."""
        if self.around_migrations is None:
            yield
            return
        before, after = self.around_migrations
        cur = self.cursor(conn)
        cur.execute(before)
        try:
            yield
        finally:
            with suppress(*self.errors):
                cur.execute(after)
                cur.close()

    def schema(self, statement: str) -> str:
        """A migration's statement as this server runs it."""
        return statement

    def insert_id(self, cur: Any, sql: str, params: tuple[Any, ...]) -> int:
        cur.execute(sql, params)
        return int(cur.lastrowid)

    # -- chunks, keywords and vectors -----------------------------------------------------

    def insert_chunks(self, cur: Any, kb: KnowledgeBase, doc_id: str, chunks: list[Chunk],
                      vectors: np.ndarray) -> list[int] | None:
        """Write the chunk rows with their vectors and keyword rows; their keys in order if
        known without another read."""
        raise NotImplementedError

    def drop_rows(self, cur: Any, kb: KnowledgeBase, doc_id: str | None) -> None:
        """Rows kept beside the chunks of one document (or of the whole knowledge base, when
        ``doc_id`` is None), deleted before the chunks themselves."""

    def keyword(self, read: Read, kb: KnowledgeBase, terms: list[str], k: int,
                within: list[str] | None) -> list[tuple[int, float]]:
        raise NotImplementedError

    def term_count(self, read: Read, kb: KnowledgeBase, term: str, cap: int) -> int:
        """Chunks of ``kb`` holding ``term`` as ``keyword`` matches it, counted up to ``cap``."""
        raise NotImplementedError

    def vector_value(self, vector: np.ndarray) -> Any:
        """One float32 row as the vector column takes it (bytes by default)."""
        return vector.tobytes()

    def matrix(self, values: list[Any], dim: int) -> np.ndarray:
        """Stored vectors (float32 bytes by default) as one ``(n, dim)`` float32 matrix."""
        if not values:
            return np.zeros((0, dim), dtype=np.float32)
        return np.frombuffer(b"".join(values), dtype=np.float32).reshape(len(values), dim)


CHUNK_COLUMNS = "kb_id, doc_id, chunk_id, ordinal, section, title, text"  # then each backend's


def chunk_values(kb: KnowledgeBase, doc_id: str, chunk: Chunk) -> tuple[Any, ...]:
    """A chunk's values for ``CHUNK_COLUMNS``."""
    return kb.id, doc_id, chunk.id, chunk.ordinal, json.dumps(chunk.section), chunk.title, chunk.text


def keyword_body(chunk: Chunk) -> str:
    """What the keyword side indexes of a chunk: its title, headings and text."""
    return "\n".join([chunk.title, *chunk.section, chunk.text])
