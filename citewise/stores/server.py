"""What the MySQL/MariaDB and PostgreSQL stores share: both drivers take ``%s`` placeholders,
so every statement that reads or writes documents, chunks and the query log is written once
here, and each backend supplies only what differs (connecting, the chunk insert with its
vector and keyword columns, the keyword query, decoding vectors).

Reads run in autocommit, so a stateless worker sees other workers' committed writes on its
next statement; writes run in one explicit transaction that first locks the knowledge base's
row (``SELECT ... FOR UPDATE``), which orders concurrent writers of one knowledge base and
bumps its version in the same transaction as the content. ``dense_index`` reads that version
on every call and keeps at most ``cache_bytes`` of matrices, least recently used first out.
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from datetime import UTC, datetime
from typing import Any

import numpy as np

from ..errors import AlreadyExistsError, KnowledgeBaseError, StoreError
from ..kb import KBConfig, KnowledgeBase, check_name, valid_name
from ..records import Chunk, Document
from ..storable import storable
from . import sentence_rows
from .base import KB_TABLES, DenseIndex, DocumentInfo, PutResult, TermCounts
from .migrations import MIGRATIONS
from .sentence_rows import SentenceRowsMixin, SentenceVectors
from .server_log import ServerLogMixin
from .urls import ServerURL, redact

DEFAULT_CACHE_BYTES = 512 * 2**20


def now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def keyword_body(chunk: Chunk) -> str:
    return "\n".join([chunk.title, *chunk.section, chunk.text])


def kb_token(kb_id: int) -> str:
    """A word only this knowledge base's chunks carry in the full-text index: the index
    intersects it with the query terms itself, and ``kb_id = %s`` in the same statement keeps
    the wall even if a document happens to contain the word."""
    return f"cwkb{kb_id}x"


class ServerStore(ServerLogMixin, SentenceRowsMixin):
    """Base of the server stores; subclasses set ``backend`` and the hooks at the bottom."""

    backend = ""  # the key into MIGRATIONS
    driver_error: type[Exception] = Exception

    def __init__(self, url: str, cache_bytes: int = DEFAULT_CACHE_BYTES) -> None:
        self.url = redact(url)
        self.target = ServerURL.parse(url)
        self.cache_bytes = cache_bytes
        self._lock = threading.RLock()
        self._dense: OrderedDict[int, DenseIndex] = OrderedDict()
        self._sizes: dict[int, tuple[int, int]] = {}  # kb id -> (version, chunk count)
        self._counts = TermCounts()
        try:
            self.conn = self._connect()
        except self.driver_error as e:
            raise StoreError(f"Cannot open store {self.url}: {e}") from None
        self.migrate()

    # -- plumbing -------------------------------------------------------------------------

    @contextmanager
    def transaction(self) -> Iterator[Any]:
        """One transaction on the store's connection; driver errors become ``StoreError``.
        A connection the server closed (idle timeout, restart) is opened again before the
        transaction starts; one lost in the middle rolls back and raises."""
        with self._lock:
            cur = self._retry_once(self._begin, "cannot start a transaction")
            try:
                yield cur
                self._commit(cur)
            except BaseException as e:
                self._rollback(cur)
                if isinstance(e, self.driver_error):
                    raise StoreError(f"{self.url}: write failed and was rolled back: {e}") from None
                raise
            finally:
                with suppress(self.driver_error):
                    cur.close()

    def _rows(self, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        """One autocommit read: it sees every write committed before it started."""

        def read() -> list[tuple[Any, ...]]:
            cur = self.conn.cursor()
            try:
                cur.execute(sql, params)
                return list(cur.fetchall())
            finally:
                cur.close()

        with self._lock:
            return self._retry_once(read, "read failed")

    def _retry_once(self, step: Any, what: str) -> Any:
        """Run ``step``; if it fails because the connection is gone, reconnect and run it again."""
        try:
            return step()
        except self.driver_error as e:
            if self._alive():
                raise StoreError(f"{self.url}: {what}: {e}") from None
        with suppress(Exception):
            self.conn.close()
        try:
            self.conn = self._connect()
            return step()
        except self.driver_error as e:
            raise StoreError(f"{self.url}: {what} (reconnected): {e}") from None

    def _read(self, sql: str, params: tuple[Any, ...]) -> list[tuple[Any, ...]]:
        return self._rows(sql, params)

    @contextmanager
    def _sentence_transaction(self, kb: KnowledgeBase) -> Iterator[Any]:
        with self.transaction() as cur:
            self._lock_kb(cur, kb)
            yield cur

    def migrate(self) -> list[str]:
        """Apply the named migrations not yet recorded, under a server-wide lock so that two
        workers opening a new database at once do not both apply them."""
        applied: list[str] = []
        with self.transaction() as cur:
            self._migration_lock(cur)
            cur.execute(
                "CREATE TABLE IF NOT EXISTS migrations (name VARCHAR(128) PRIMARY KEY, "
                "applied_at VARCHAR(32) NOT NULL)"
            )
            cur.execute("SELECT name FROM migrations")
            done = {r[0] for r in cur.fetchall()}
            for name, statements in MIGRATIONS[self.backend]:
                if name in done:
                    continue
                for statement in statements:
                    cur.execute(self._migration_sql(statement))
                cur.execute("INSERT INTO migrations VALUES (%s, %s)", (name, now()))
                applied.append(name)
        return applied

    def migrations_applied(self) -> list[str]:
        return [r[0] for r in self._rows("SELECT name FROM migrations ORDER BY name")]

    def close(self) -> None:
        with self._lock:
            self.conn.close()

    # -- knowledge bases ------------------------------------------------------------------

    def create_kb(self, name: str, config: KBConfig) -> KnowledgeBase:
        check_name(name)
        try:
            with self.transaction() as cur:
                cur.execute(
                    "INSERT INTO kbs (name, config, created_at, version) VALUES (%s, %s, %s, 0)",
                    (name, config.to_json(), now()),
                )
        except StoreError:
            if self._rows("SELECT 1 FROM kbs WHERE name = %s", (name,)):
                raise AlreadyExistsError(f"Knowledge base {name!r} already exists") from None
            raise
        return self.get_kb(name)

    def get_kb(self, name: str) -> KnowledgeBase:
        rows = self._rows("SELECT id, name, config, created_at FROM kbs WHERE name = %s",
                          (name,)) if valid_name(name) else []
        if not rows:
            raise KnowledgeBaseError(
                f"No knowledge base named {name!r}; create it with `citewise ingest --kb {name} PATH`"
            )
        return _kb(rows[0])

    def list_kbs(self) -> list[KnowledgeBase]:
        return [_kb(r) for r in self._rows("SELECT id, name, config, created_at FROM kbs ORDER BY name")]

    def update_kb(self, name: str, config: KBConfig) -> KnowledgeBase:
        kb = self.get_kb(name)
        with self.transaction() as cur:
            cur.execute("UPDATE kbs SET config = %s WHERE id = %s", (config.to_json(), kb.id))
        return self.get_kb(name)

    def delete_kb(self, name: str) -> None:
        kb = self.get_kb(name)
        with self.transaction() as cur:
            for table in KB_TABLES:
                cur.execute(f"DELETE FROM {table} WHERE kb_id = %s", (kb.id,))
            self._drop_kb_extras(cur, kb)
            cur.execute("DELETE FROM kbs WHERE id = %s", (kb.id,))
        with self._lock:
            self._dense.pop(kb.id, None)
            self._sizes.pop(kb.id, None)
            self._counts.forget(kb.id)

    # -- documents ------------------------------------------------------------------------

    def document_hash(self, kb: KnowledgeBase, doc_id: str) -> str | None:
        if not storable(doc_id):
            return None
        rows = self._rows(
            "SELECT content_hash FROM documents WHERE kb_id = %s AND doc_id = %s", (kb.id, doc_id)
        )
        return rows[0][0] if rows else None

    def _lock_kb(self, cur: Any, kb: KnowledgeBase) -> None:
        cur.execute("SELECT version FROM kbs WHERE id = %s FOR UPDATE", (kb.id,))
        if cur.fetchone() is None:
            raise KnowledgeBaseError(f"Knowledge base {kb.name!r} no longer exists")

    def put_document(
        self, kb: KnowledgeBase, doc: Document, chunks: list[Chunk], vectors: np.ndarray,
        sentences: Sequence[SentenceVectors | None] | None = None,
    ) -> PutResult:
        if len(chunks) != len(vectors):
            raise StoreError(f"{doc.id}: {len(chunks)} chunks but {len(vectors)} vectors")
        per_chunk = sentence_rows.check(doc.id, chunks, sentences, kb.config.dim)
        vectors = np.ascontiguousarray(vectors, dtype=np.float32)
        if len(chunks) and vectors.shape[1] != kb.config.dim:
            raise StoreError(f"{doc.id}: {vectors.shape[1]}-dimensional vectors, "
                             f"knowledge base {kb.name!r} holds {kb.config.dim}")
        with self.transaction() as cur:
            self._lock_kb(cur, kb)
            cur.execute(
                "SELECT content_hash FROM documents WHERE kb_id = %s AND doc_id = %s",
                (kb.id, doc.id),
            )
            old = cur.fetchone()
            if old and old[0] == doc.content_hash:
                return "unchanged"
            self._delete_chunks(cur, kb, doc.id)
            cur.execute("DELETE FROM documents WHERE kb_id = %s AND doc_id = %s", (kb.id, doc.id))
            cur.execute(
                "INSERT INTO documents (kb_id, doc_id, title, source, content_hash, ingested_at) "
                "VALUES (%s, %s, %s, %s, %s, %s)",
                (kb.id, doc.id, doc.title, doc.source, doc.content_hash, now()),
            )
            if chunks:
                self._insert_chunks(cur, kb, doc.id, chunks, vectors)
            if any(s is not None for s in per_chunk):
                self._insert_sentences(cur, kb, doc.id, per_chunk)
            cur.execute("UPDATE kbs SET version = version + 1 WHERE id = %s", (kb.id,))
        return "replaced" if old else "added"

    def delete_document(self, kb: KnowledgeBase, doc_id: str) -> bool:
        if not storable(doc_id):  # never stored, so not there
            return False
        with self.transaction() as cur:
            self._lock_kb(cur, kb)
            self._delete_chunks(cur, kb, doc_id)
            cur.execute("DELETE FROM documents WHERE kb_id = %s AND doc_id = %s", (kb.id, doc_id))
            found = cur.rowcount > 0
            cur.execute("UPDATE kbs SET version = version + 1 WHERE id = %s", (kb.id,))
        return found

    def _delete_chunks(self, cur: Any, kb: KnowledgeBase, doc_id: str) -> None:
        """A document's chunks and their sentence rows (inside the caller's transaction)."""
        cur.execute(sentence_rows.delete_document_sql("%s", self._key), (kb.id, kb.id, doc_id))
        cur.execute("DELETE FROM chunks WHERE kb_id = %s AND doc_id = %s", (kb.id, doc_id))

    def _insert_sentences(self, cur: Any, kb: KnowledgeBase, doc_id: str,
                          per_chunk: list[SentenceVectors | None]) -> None:
        """Sentence rows for the chunks just inserted: their keys ascend in insertion order."""
        cur.execute(f"SELECT {self._key} FROM chunks WHERE kb_id = %s AND doc_id = %s "
                    f"ORDER BY {self._key}", (kb.id, doc_id))
        keys = [int(r[0]) for r in cur.fetchall()]
        rows = [(kb.id, key, *said.values()) for key, said in zip(keys, per_chunk, strict=True)
                if said is not None]
        cur.executemany(sentence_rows.insert_sql("%s"), rows)

    def list_documents(self, kb: KnowledgeBase) -> list[DocumentInfo]:
        rows = self._rows(
            "SELECT d.doc_id, d.title, d.source, d.content_hash, "
            "(SELECT count(*) FROM chunks c WHERE c.kb_id = d.kb_id AND c.doc_id = d.doc_id), "
            "d.ingested_at FROM documents d WHERE d.kb_id = %s ORDER BY d.doc_id",
            (kb.id,),
        )
        return [DocumentInfo(r[0], r[1], r[2], r[3], int(r[4]), r[5]) for r in rows]

    def count_chunks(self, kb: KnowledgeBase) -> int:
        """The knowledge base's chunks, counted once per version of it (the version is read
        every time, so another worker's writes are seen)."""
        rows = self._rows("SELECT version FROM kbs WHERE id = %s", (kb.id,))
        seen = self._sizes.get(kb.id)
        if rows and seen is not None and seen[0] == int(rows[0][0]):
            return seen[1]
        rows = self._rows("SELECT k.version, (SELECT count(*) FROM chunks c WHERE c.kb_id = k.id) "
                          "FROM kbs k WHERE k.id = %s", (kb.id,))
        if not rows:
            return 0
        self._sizes[kb.id] = (int(rows[0][0]), int(rows[0][1]))
        return int(rows[0][1])

    def term_counts(self, kb: KnowledgeBase, terms: list[str], cap: int) -> dict[str, int]:
        rows = self._rows("SELECT version FROM kbs WHERE id = %s", (kb.id,))
        if not rows:
            raise KnowledgeBaseError(f"Knowledge base {kb.name!r} no longer exists")
        return self._counts.get(kb.id, int(rows[0][0]), terms, cap,
                                lambda term, cap: self._term_count(kb, term, cap))

    # -- retrieval ------------------------------------------------------------------------

    def dense_index(self, kb: KnowledgeBase) -> DenseIndex:
        rows = self._rows("SELECT version FROM kbs WHERE id = %s", (kb.id,))
        if not rows:
            raise KnowledgeBaseError(f"Knowledge base {kb.name!r} no longer exists")
        version = int(rows[0][0])
        with self._lock:
            cached = self._dense.get(kb.id)
            if cached is not None and cached.version == version:
                self._dense.move_to_end(kb.id)
                return cached
        with self.transaction() as cur:  # the version and the vectors from one snapshot
            cur.execute("SELECT version FROM kbs WHERE id = %s", (kb.id,))
            version = int(cur.fetchone()[0])
            cur.execute(
                f"SELECT {self._key}, {self._vector_select} FROM chunks WHERE kb_id = %s "
                f"ORDER BY {self._key}", (kb.id,)
            )
            rows = cur.fetchall()
        keys = np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))
        matrix = self._matrix([r[1] for r in rows], kb.config.dim)
        index = DenseIndex(keys, matrix, version)
        with self._lock:
            self._dense[kb.id] = index
            self._dense.move_to_end(kb.id)
            total = sum(d.matrix.nbytes for d in self._dense.values())
            while total > self.cache_bytes and len(self._dense) > 1:
                total -= self._dense.popitem(last=False)[1].matrix.nbytes
        return index

    def dense_search(self, kb: KnowledgeBase, query: np.ndarray, k: int
                     ) -> tuple[np.ndarray, np.ndarray]:
        """Exact cosine search over the knowledge base's cached matrix."""
        return self.dense_index(kb).search(query, k)

    def vectors(self, kb: KnowledgeBase, keys: list[int]) -> np.ndarray:
        return self.dense_index(kb).take(keys, kb.name)

    def chunks(self, kb: KnowledgeBase, keys: list[int]) -> dict[int, Chunk]:
        if not keys:
            return {}
        marks = ",".join(["%s"] * len(keys))
        rows = self._rows(
            f"SELECT {self._key}, doc_id, ordinal, section, text, title FROM {self._chunks_from} "
            f"WHERE kb_id = %s AND {self._key} IN ({marks})",
            (kb.id, *[int(k) for k in keys]),
        )
        return {int(r[0]): Chunk(r[1], r[2], tuple(json.loads(r[3])), r[4], r[5]) for r in rows}

    def chunk_by_id(self, kb: KnowledgeBase, chunk_id: str) -> Chunk | None:
        if not storable(chunk_id):
            return None
        rows = self._rows(
            "SELECT doc_id, ordinal, section, text, title FROM chunks "
            "WHERE kb_id = %s AND chunk_id = %s",
            (kb.id, chunk_id),
        )
        return Chunk(rows[0][0], rows[0][1], tuple(json.loads(rows[0][2])), rows[0][3], rows[0][4]) \
            if rows else None

    # -- what each backend supplies -------------------------------------------------------

    _key = "chunk_key"  # the chunk key column
    _vector_select = "vector"
    _chunks_from = "chunks"

    def _connect(self) -> Any:
        raise NotImplementedError

    def _alive(self) -> bool:
        """Whether the connection is still open (a failed statement may have closed it)."""
        raise NotImplementedError

    def _begin(self) -> Any:
        raise NotImplementedError

    def _commit(self, cur: Any) -> None:
        cur.execute("COMMIT")

    def _rollback(self, cur: Any) -> None:
        with suppress(self.driver_error):  # a lost connection: the server rolls back itself
            cur.execute("ROLLBACK")

    def _migration_lock(self, cur: Any) -> None:
        raise NotImplementedError

    def _migration_sql(self, statement: str) -> str:
        return statement

    def _insert_chunks(self, cur: Any, kb: KnowledgeBase, doc_id: str, chunks: list[Chunk],
                       vectors: np.ndarray) -> None:
        raise NotImplementedError

    def _insert_id(self, cur: Any, sql: str, params: tuple[Any, ...]) -> int:
        raise NotImplementedError

    def _vector_value(self, vector: np.ndarray) -> Any:
        """One float32 row as the vector column takes it (bytes by default)."""
        return vector.tobytes()

    def _term_count(self, kb: KnowledgeBase, term: str, cap: int) -> int:
        """Chunks of ``kb`` holding ``term`` as ``keyword`` matches it, counted up to ``cap``."""
        raise NotImplementedError

    def _drop_kb_extras(self, cur: Any, kb: KnowledgeBase) -> None:
        """Anything beyond the three tables a knowledge base owns (an index, say)."""

    def _matrix(self, values: list[Any], dim: int) -> np.ndarray:
        """Stored vectors (float32 bytes by default) as one ``(n, dim)`` float32 matrix."""
        if not values:
            return np.zeros((0, dim), dtype=np.float32)
        return np.frombuffer(b"".join(values), dtype=np.float32).reshape(len(values), dim)


def _kb(row: tuple[Any, ...]) -> KnowledgeBase:
    return KnowledgeBase(int(row[0]), row[1], KBConfig.from_json(row[2]), row[3])
