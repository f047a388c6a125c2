"""``SQLStore``: the one store class, on SQLite, MySQL/MariaDB or PostgreSQL through a
``Dialect`` (``dialect.py``) that carries only what differs between them.

This module holds knowledge bases, documents and the vector switch; the class takes its
search (``search_rows``), query log and shadow vectors (``log_rows``) and sentence vectors
(``sentence_rows``) from one small class each, which reach the database only through the
store's ``db`` (``database.Database``). Tenants and keys are ``store.tenants``
(``tenants.py``), ingestion jobs ``store.jobs`` (``job_rows.py``). Every read and write
names its knowledge base in the statement itself.

Every write of a knowledge base runs in one transaction that first holds the knowledge base's
row (``Database.lock_kb``), which orders concurrent writers of one knowledge base, and bumps
its version in the same transaction as the content: readers' caches key on that version.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from citewise.errors import AlreadyExistsError, ConfigError, KnowledgeBaseError, StoreError
from citewise.kb import KBConfig, KnowledgeBase, check_name, valid_name
from citewise.records import Chunk, Document
from citewise.storable import storable
from citewise.stores import rate_rows, sentence_rows
from citewise.stores.base import KB_TABLES, DocumentInfo, PutResult
from citewise.stores.database import KB_COLUMNS, Database, kb_of, now
from citewise.stores.dialect import Dialect
from citewise.stores.job_rows import SQLJobs
from citewise.stores.kb_cache import KBCache
from citewise.stores.log_rows import QueryLogTable, ShadowTable, missing_vectors
from citewise.stores.search_rows import SQLSearch
from citewise.stores.sentence_rows import SentenceTable, SentenceVectors
from citewise.stores.tenants import SQLTenants
from citewise.tenancy import Tenants

if TYPE_CHECKING:  # ratelimit imports stores.urls
    from citewise.ratelimit import Decision
    from citewise.stores.roles import Jobs

# Where exact scoring's median passes ~10 ms on this 2-core machine: benchmarks/scale.py
# (2026-11-30, shared with other jobs) measured exact dense p50 6.4 ms at 50,000 chunks,
# 5.2 ms at 100,000 and 10.6 ms at 200,000, against 1.5-3 ms through the graph.
ANN_MIN_CHUNKS = 100_000
# per process and database: dense matrices and keyword indexes (with their chunk records)
# together (kb_cache.py)
DEFAULT_CACHE_BYTES = 512 * 2**20
# the largest knowledge base whose BM25 index is kept in memory; larger ones (and those on the
# approximate dense path) are searched by the database's full-text index. At 100,000 chunks of
# ~200 words the index takes ~80 MB beside the dense matrix's ~150 MB (384 dimensions), and
# the chunk records it keeps (texts, gate stems: chunk_table.py) about 2.4 kB a chunk more on
# SciFact (28.5 MB for 11,878 chunks): ~240 MB, so such a knowledge base nearly fills the
# default budget alone.
KEYWORD_INDEX_MAX_CHUNKS = 100_000
OPTIONS = {"ann_min_chunks": ANN_MIN_CHUNKS, "cache_bytes": DEFAULT_CACHE_BYTES,
           "keyword_index_max_chunks": KEYWORD_INDEX_MAX_CHUNKS}  # ``?name=N`` on a store URL


def url_options(options: Mapping[str, str]) -> dict[str, int]:
    """The whole-number ``OPTIONS`` of a store URL's query (others are the driver's)."""
    out = {}
    for name in OPTIONS.keys() & options.keys():
        try:
            out[name] = int(options[name])
        except ValueError:
            raise ConfigError(f"store option {name} must be a whole number, "
                              f"not {options[name]!r}") from None
        if out[name] < 0:
            raise ConfigError(f"store option {name} must be 0 or more")
    return out


class SQLStore(SQLSearch, QueryLogTable, ShadowTable, SentenceTable):
    """``cache``: another store's ``KBCache`` to share (the stores of one process on one
    database), else a new one of ``cache_bytes``."""

    def __init__(self, dialect: Dialect, ann_min_chunks: int = ANN_MIN_CHUNKS,
                 cache_bytes: int = DEFAULT_CACHE_BYTES,
                 keyword_index_max_chunks: int = KEYWORD_INDEX_MAX_CHUNKS,
                 cache: KBCache | None = None) -> None:
        self.dialect = dialect
        self.db = Database(dialect)
        self.url = self.db.url
        self.ann_min_chunks = ann_min_chunks
        self.keyword_index_max_chunks = keyword_index_max_chunks
        self.cache = cache if cache is not None else KBCache(cache_bytes)
        self.pins = threading.local()  # versions pinned per thread (``SQLSearch.pinned``)
        self.tenants: Tenants = SQLTenants(self.db)
        self.jobs: Jobs = SQLJobs(self.db)
        self.migrate()

    def migrate(self) -> list[str]:
        """Apply the named migrations not yet recorded; the names applied."""
        return self.db.migrate()

    def migrations_applied(self) -> list[str]:
        return [r[0] for r in self.db.rows("SELECT name FROM migrations ORDER BY name")]

    def take_rate(self, name: str, rate_per_minute: int, now: int | None = None) -> Decision:
        """One request of API key ``name`` against its shared rate window (``rate_rows.py``)."""
        return rate_rows.take(self.db, name, rate_per_minute, now)

    def close(self) -> None:
        if self.dialect.ann is not None:
            self.dialect.ann.close(self.db)
        self.db.close()

    # -- knowledge bases ------------------------------------------------------------------

    def create_kb(self, name: str, config: KBConfig, tenant: int = 0) -> KnowledgeBase:
        check_name(name)
        self.db.insert_new(
            "INSERT INTO kbs (tenant_id, name, config, created_at, version) "
            "VALUES (%s, %s, %s, %s, 0)", (tenant, name, config.to_json(), now()),
            lambda: bool(self._kb_rows(name, tenant)),
            AlreadyExistsError(f"Knowledge base {name!r} already exists"))
        return self.get_kb(name, tenant)

    def _kb_rows(self, name: str, tenant: int) -> list[tuple[Any, ...]]:
        return self.db.rows(f"SELECT {KB_COLUMNS} FROM kbs WHERE tenant_id = %s AND name = %s",
                            (tenant, name)) if valid_name(name) else []

    def get_kb(self, name: str, tenant: int = 0) -> KnowledgeBase:
        rows = self._kb_rows(name, tenant)
        if not rows:
            raise KnowledgeBaseError(
                f"No knowledge base named {name!r}; create it with `citewise ingest --kb {name} PATH`"
            )
        return kb_of(rows[0])

    def list_kbs(self, tenant: int = 0) -> list[KnowledgeBase]:
        return [kb_of(r) for r in self.db.rows(
            f"SELECT {KB_COLUMNS} FROM kbs WHERE tenant_id = %s ORDER BY name", (tenant,))]

    def update_kb(self, name: str, config: KBConfig, tenant: int = 0) -> KnowledgeBase:
        kb = self.get_kb(name, tenant)
        with self.db.transaction() as cur:
            cur.execute("UPDATE kbs SET config = %s WHERE id = %s", (config.to_json(), kb.id))
        return self.get_kb(name, tenant)

    def delete_kb(self, name: str, tenant: int = 0) -> None:
        kb = self.get_kb(name, tenant)
        with self.db.transaction() as cur:
            self.dialect.drop_rows(cur, kb, None)
            for table in KB_TABLES:
                cur.execute(f"DELETE FROM {table} WHERE kb_id = %s", (kb.id,))
            if self.dialect.ann is not None:
                self.dialect.ann.drop(cur, kb)
            cur.execute("DELETE FROM kbs WHERE id = %s", (kb.id,))
        self._unpin(kb)
        self.cache.forget(kb.id)

    # -- documents ------------------------------------------------------------------------

    def document_hash(self, kb: KnowledgeBase, doc_id: str) -> str | None:
        if not storable(doc_id):
            return None
        rows = self.db.rows("SELECT content_hash FROM documents WHERE kb_id = %s AND doc_id = %s",
                            (kb.id, doc_id))
        return rows[0][0] if rows else None

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
        ann, key = self.dialect.ann, self.dialect.key
        with self.db.transaction() as cur:  # holds the store's lock: no search loads an index now
            version = self.db.lock_kb(cur, kb)
            tracked = ann is not None and ann.tracks(kb)
            cur.execute("SELECT content_hash FROM documents WHERE kb_id = %s AND doc_id = %s",
                        (kb.id, doc.id))
            old = cur.fetchone()
            if old and old[0] == doc.content_hash:
                return "unchanged"
            removed = self._drop_chunks(cur, kb, doc.id, tracked)
            cur.execute("DELETE FROM documents WHERE kb_id = %s AND doc_id = %s", (kb.id, doc.id))
            cur.execute("INSERT INTO documents (kb_id, doc_id, title, source, content_hash, "
                        "ingested_at) VALUES (%s, %s, %s, %s, %s, %s)",
                        (kb.id, doc.id, doc.title, doc.source, doc.content_hash, now()))
            keys = self.dialect.insert_chunks(cur, kb, doc.id, chunks, vectors) if chunks else []
            if keys is None and (tracked or any(s is not None for s in per_chunk)):
                cur.execute(f"SELECT {key} FROM chunks WHERE kb_id = %s AND doc_id = %s "
                            f"ORDER BY {key}", (kb.id, doc.id))  # keys ascend in insert order
                keys = [int(r[0]) for r in cur.fetchall()]
            said = [(kb.id, k, *s.values()) for k, s in zip(keys or [], per_chunk, strict=False)
                    if s is not None]
            if said:
                cur.executemany(sentence_rows.INSERT_SQL, said)
            cur.execute("UPDATE kbs SET version = version + 1 WHERE id = %s", (kb.id,))
        self._unpin(kb)
        if ann is not None:
            ann.written(kb, version, removed, list(zip(keys or [], [c.id for c in chunks],
                                                       strict=False)), vectors)
        return "replaced" if old else "added"

    def _drop_chunks(self, cur: Any, kb: KnowledgeBase, doc_id: str, tracked: bool) -> list[int]:
        """Delete a document's chunks and their rows; their keys when an index tracks them."""
        key = self.dialect.key
        removed = []
        if tracked:
            cur.execute(f"SELECT {key} FROM chunks WHERE kb_id = %s AND doc_id = %s", (kb.id, doc_id))
            removed = [int(r[0]) for r in cur.fetchall()]
        self.dialect.drop_rows(cur, kb, doc_id)
        cur.execute(sentence_rows.delete_document_sql(key), (kb.id, kb.id, doc_id))
        cur.execute("DELETE FROM chunks WHERE kb_id = %s AND doc_id = %s", (kb.id, doc_id))
        return removed

    def delete_document(self, kb: KnowledgeBase, doc_id: str) -> bool:
        if not storable(doc_id):  # never stored, so not there
            return False
        ann = self.dialect.ann
        with self.db.transaction() as cur:
            version = self.db.lock_kb(cur, kb)
            removed = self._drop_chunks(cur, kb, doc_id, ann is not None and ann.tracks(kb))
            cur.execute("DELETE FROM documents WHERE kb_id = %s AND doc_id = %s", (kb.id, doc_id))
            found = cur.rowcount > 0
            cur.execute("UPDATE kbs SET version = version + 1 WHERE id = %s", (kb.id,))
        self._unpin(kb)
        if ann is not None:
            ann.written(kb, version, removed, [], np.zeros((0, kb.config.dim), np.float32))
        return found

    def list_documents(self, kb: KnowledgeBase) -> list[DocumentInfo]:
        rows = self.db.rows(
            "SELECT d.doc_id, d.title, d.source, d.content_hash, "
            "(SELECT count(*) FROM chunks c WHERE c.kb_id = d.kb_id AND c.doc_id = d.doc_id), "
            "d.ingested_at FROM documents d WHERE d.kb_id = %s ORDER BY d.doc_id", (kb.id,))
        return [DocumentInfo(r[0], r[1], r[2], r[3], int(r[4]), r[5]) for r in rows]

    # -- the vector switch (replay) -------------------------------------------------------

    def switch_vectors(self, kb: KnowledgeBase, config: KBConfig) -> KnowledgeBase:
        """Every live vector replaced by its shadow, with the configuration, in one transaction
        that holds the knowledge base; nothing changes when a chunk lacks its shadow. The copy
        is a correlated subquery, which every backend accepts (their ``UPDATE ... FROM`` /
        ``UPDATE ... JOIN`` forms differ)."""
        key = self.dialect.key
        with self.db.transaction() as cur:
            self.db.lock_kb(cur, kb)  # no document changes meanwhile
            cur.execute(
                "SELECT count(*) FROM chunks c WHERE c.kb_id = %s AND NOT EXISTS "
                "(SELECT 1 FROM shadow_vectors s WHERE s.kb_id = c.kb_id "
                f"AND s.chunk_key = c.{key} AND s.chunk_id = c.chunk_id AND s.embedder = %s)",
                (kb.id, config.embedder),
            )
            missing = int(cur.fetchone()[0])
            if missing:
                raise missing_vectors(kb, config.embedder, missing)
            if self.dialect.ann is not None:  # an index of the old vectors (and dimension) goes
                self.dialect.ann.drop(cur, kb)
            cur.execute(
                "UPDATE chunks SET vector = (SELECT s.vector FROM shadow_vectors s "
                f"WHERE s.kb_id = chunks.kb_id AND s.chunk_key = chunks.{key}) WHERE kb_id = %s",
                (kb.id,),
            )
            cur.execute("UPDATE kbs SET config = %s, version = version + 1 WHERE id = %s",
                        (config.to_json(), kb.id))
            # the old embedder's sentence vectors: never served (their keys name it), dropped;
            # `citewise replay --switch` then embeds the new one's (sentence_vectors.backfill)
            cur.execute("DELETE FROM chunk_sentences WHERE kb_id = %s", (kb.id,))
            cur.execute("DELETE FROM shadow_vectors WHERE kb_id = %s", (kb.id,))
        self._unpin(kb)
        self.cache.forget(kb.id)
        return self.get_kb(kb.name, kb.tenant_id)
