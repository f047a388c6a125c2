"""PostgreSQL with pgvector: ``postgresql://user:pass@host:port/db`` (``postgres://`` too).

Driven by psycopg 3; this is its ``Dialect`` for ``SQLStore``, with ``PgHnsw`` as its
approximate-search hooks. Chunk rows hold a pgvector ``vector`` column (no fixed dimension, so one
table serves every embedder); a narrow ``chunk_terms`` row beside each holds the ``tsvector``
of title, headings and text under the ``english`` configuration plus the knowledge base's
own token (``cwkb<id>x``, ``simple`` configuration), all written in the document's one
transaction. (With the tsvector in the wide chunk row, ranking 5,000 matches read 4,270 heap
pages: 60 ms at 50,000 chunks.)

Dense search is exact cosine over the knowledge base's matrix, fetched in one statement (pgvector's
binary format) and cached until the knowledge base's version changes; the version is read on
every search, so stateless workers see each other's writes. A knowledge base of at least
``ann_min_chunks`` chunks (``?ann_min_chunks=N`` on the URL, default 100,000) is searched
through an HNSW index of its own instead: the column has no fixed dimension, so the index is a
partial expression index ``(vector::vector(dim)) WHERE kb_id = <id>``, built on the first such
search, queried with the same expression and ``kb_id`` (so another knowledge base's rows are
never candidates), and dropped with the knowledge base or when its vectors switch embedder.
The cosines returned are recomputed from the stored vectors, as on the exact path. The keyword side is
``tsv @@ (terms && token)`` on the GIN index, ranked by ``ts_rank_cd``, with ``kb_id = %s`` in
the same statement (with ``within``, the index matches those words and the rank reads all).
A server without pgvector gets ``bytea`` vectors and the same exact search,
and says so once in the log.
"""

from __future__ import annotations

import logging
import re
import struct
from typing import Any

import numpy as np

from citewise.errors import StoreError
from citewise.kb import KnowledgeBase
from citewise.records import Chunk
from citewise.stores.database import Database
from citewise.stores.dialect import CHUNK_COLUMNS, Dialect, Read, chunk_values, keyword_body
from citewise.stores.kb_cache import KBCache
from citewise.stores.sql import OPTIONS, SQLStore, url_options
from citewise.stores.urls import ServerURL, redact

log = logging.getLogger(__name__)

_TOKEN = re.compile(r"[^\W_]+")
# Chosen on real MiniLM vectors (100,000 perturbed SciFact chunks, train claims) as the cheapest
# reaching recall@10 0.99 against exact search (test claims: 0.988); pgvector's defaults (m 16,
# ef_construction 64, ef_search 40) reach 0.82, and ef_search 200 on them 0.96. The build takes
# twice as long as at ef_construction 64. See benchmarks/pg_hnsw.py.
EF_SEARCH = 300  # candidates HNSW keeps per query (raised to k when k is larger)
HNSW_M, HNSW_EF_CONSTRUCTION = 16, 128
HNSW_MAX_DIM = 2000  # pgvector's limit for an HNSW index on ``vector``
MIGRATION_LOCK = 727761  # advisory lock keys
BUILD_LOCK = 727762


def _driver() -> Any:
    try:
        import psycopg
    except ImportError:
        raise StoreError("The PostgreSQL store needs psycopg: pip install 'citewise[server]'") from None
    return psycopg


def kb_token(kb_id: int) -> str:
    """A word only this knowledge base's chunks carry in the full-text index: the index
    intersects it with the query terms itself, and ``kb_id = %s`` in the same statement keeps
    the wall even if a document happens to contain the word."""
    return f"cwkb{kb_id}x"


class _Vector:
    """A float32 row on its way into a pgvector column (dumped in pgvector's binary format)."""

    __slots__ = ("row",)

    def __init__(self, row: np.ndarray) -> None:
        self.row = row


class PostgresDialect(Dialect):
    name = "postgres"
    around_migrations = (f"SELECT pg_advisory_lock({MIGRATION_LOCK})",
                         f"SELECT pg_advisory_unlock({MIGRATION_LOCK})")
    clock = "EXTRACT(EPOCH FROM clock_timestamp())"  # not now(): the transaction's start

    def __init__(self, url: str) -> None:
        self.errors = (_driver().Error,)
        self.url = redact(url)
        self.target = ServerURL.parse(url)
        self.pgvector = False
        self.ann = PgHnsw(self)

    def connect(self) -> Any:
        t = self.target
        conn = _driver().connect(
            host=t.host, port=t.port or 5432, user=t.user or "postgres", password=t.password or None,
            dbname=t.database, autocommit=True,
            connect_timeout=int(t.options.get("connect_timeout", 10)),
        )
        self.pgvector = self._ensure_pgvector(conn)
        if self.pgvector:
            _register_vector(conn)
        else:
            log.warning("%s: the pgvector extension is not installed on this server; vectors are "
                        "kept as bytea and searched exactly in this process", self.url)
        return conn

    def _ensure_pgvector(self, conn: Any) -> bool:
        """pgvector in use: the column's type if the table exists, else whether the extension
        is (or can be) installed."""
        column = conn.execute(
            "SELECT udt_name FROM information_schema.columns WHERE table_schema = current_schema() "
            "AND table_name = 'chunks' AND column_name = 'vector'"
        ).fetchone()
        if column is not None:
            return bool(column[0] == "vector")
        available = conn.execute(
            "SELECT 1 FROM pg_available_extensions WHERE name = 'vector'"
        ).fetchone()
        if available:
            conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        return bool(available)

    def alive(self, conn: Any) -> bool:
        return not conn.closed

    def begin(self, conn: Any, write: bool = True) -> Any:
        cur = conn.cursor(binary=True)
        cur.execute("BEGIN" if write else "BEGIN ISOLATION LEVEL REPEATABLE READ")
        return cur

    def schema(self, statement: str) -> str:
        return statement.replace("{vector}", "vector" if self.pgvector else "bytea")

    def insert_id(self, cur: Any, sql: str, params: tuple[Any, ...]) -> int:
        cur.execute(sql + " RETURNING id", params)
        return int(cur.fetchone()[0])

    def insert_chunks(self, cur: Any, kb: KnowledgeBase, doc_id: str, chunks: list[Chunk],
                      vectors: np.ndarray) -> None:
        token = kb_token(kb.id)
        cur.executemany(
            f"WITH c AS (INSERT INTO chunks ({CHUNK_COLUMNS}, vector) VALUES ({', '.join(['%s'] * 8)}) "
            "RETURNING chunk_key, kb_id) INSERT INTO chunk_terms (chunk_key, kb_id, tsv) "
            "SELECT chunk_key, kb_id, to_tsvector('english', %s) || to_tsvector('simple', %s) FROM c",
            [(*chunk_values(kb, doc_id, c), self.vector_value(v), keyword_body(c), token)
             for c, v in zip(chunks, vectors, strict=True)],
        )

    def vector_value(self, vector: np.ndarray) -> Any:
        return _Vector(vector) if self.pgvector else vector.tobytes()

    def matrix(self, values: list[Any], dim: int) -> np.ndarray:
        if not self.pgvector or not values:
            return super().matrix(values, dim)
        raw = np.frombuffer(b"".join(values), dtype=np.uint8).reshape(len(values), 4 + 4 * dim)
        return np.ascontiguousarray(raw[:, 4:]).view(">f4").astype(np.float32)

    def keyword(self, read: Read, kb: KnowledgeBase, terms: list[str], k: int,
                within: list[str] | None) -> list[tuple[int, float]]:
        """Ranked by ``ts_rank_cd`` of all the terms; with ``within``, the GIN index finds only
        the chunks holding one of those (the filter and the ranking are separate queries)."""
        words = _words(terms)
        if not words:
            return []
        picked = _words([t for t in within if t in terms]) if within is not None else words
        if not picked:
            return []
        rows = read(
            "SELECT chunk_key, ts_rank_cd(tsv, q) AS score "
            "FROM chunk_terms, to_tsquery('english', %s) AS q "
            "WHERE kb_id = %s AND tsv @@ (to_tsquery('english', %s) && to_tsquery('simple', %s)) "
            "ORDER BY score DESC, chunk_key LIMIT %s",
            (words, kb.id, picked, kb_token(kb.id), int(k)),
        )
        return [(int(r[0]), float(r[1])) for r in rows]

    def term_count(self, read: Read, kb: KnowledgeBase, term: str, cap: int) -> int:
        words = _words([term])
        if not words:
            return 0
        return int(read(
            "SELECT count(*) FROM (SELECT 1 FROM chunk_terms WHERE kb_id = %s AND "
            "tsv @@ (to_tsquery('english', %s) && to_tsquery('simple', %s)) LIMIT %s) AS hit",
            (kb.id, words, kb_token(kb.id), int(cap)),
        )[0][0])


class PgHnsw:
    """The ``Ann`` hooks: one partial HNSW index per large knowledge base, in the database."""

    def __init__(self, dialect: PostgresDialect) -> None:
        self.dialect = dialect
        self.built: set[tuple[int, int]] = set()  # (kb id, dim) whose index this process has seen

    def usable(self, kb: KnowledgeBase) -> bool:
        return self.dialect.pgvector and kb.config.dim <= HNSW_MAX_DIM

    def tracks(self, kb: KnowledgeBase) -> bool:
        return False  # the database keeps its index in step with every write

    def prepare(self, db: Database, kb: KnowledgeBase, version: int) -> None:
        self.ensure(db, kb)

    def ensure(self, db: Database, kb: KnowledgeBase) -> str:
        """Build the knowledge base's HNSW index if it is missing; its name."""
        dim, name = kb.config.dim, hnsw_name(kb)
        if (kb.id, dim) not in self.built:
            with db.transaction() as cur:  # two workers building at once: one builds, one waits
                cur.execute(f"SELECT pg_advisory_xact_lock({BUILD_LOCK}, {int(kb.id)})")
                cur.execute(
                    f"CREATE INDEX IF NOT EXISTS {name} ON chunks USING hnsw "
                    f"((vector::vector({dim})) vector_cosine_ops) "
                    f"WITH (m = {HNSW_M}, ef_construction = {HNSW_EF_CONSTRUCTION}) "
                    f"WHERE kb_id = {int(kb.id)}"
                )
                cur.execute("ANALYZE chunks")  # the planner picks the index only if it knows kb's size
            self.built.add((kb.id, dim))
        return name

    def candidates(self, db: Database, kb: KnowledgeBase, version: int, query: np.ndarray,
                   k: int) -> tuple[np.ndarray, np.ndarray]:
        self.ensure(db, kb)
        with db.transaction(write=False) as cur:
            cur.execute(f"SET LOCAL hnsw.ef_search = {max(EF_SEARCH, min(int(k), 1000))}")
            cur.execute(ann_sql(kb), (_Vector(np.asarray(query, dtype=np.float32)), int(k)))
            rows = cur.fetchall()
        found = np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))
        return found, self.dialect.matrix([r[1] for r in rows], kb.config.dim)

    def vectors(self, kb: KnowledgeBase, version: int, keys: list[int]) -> None:
        return None

    def written(self, kb: KnowledgeBase, old_version: int, removed: list[int],
                added: list[tuple[int, str]], vectors: np.ndarray) -> None:
        pass

    def drop(self, cur: Any, kb: KnowledgeBase) -> None:
        """The index's expression casts to the knowledge base's dimension, so it goes before
        vectors of another embedder come in (built again on the next large search)."""
        if not self.dialect.pgvector:
            return
        cur.execute("SELECT indexname FROM pg_indexes WHERE schemaname = current_schema() "
                    "AND tablename = 'chunks' AND indexname LIKE %s", (f"chunks_hnsw_{int(kb.id)}\\_%",))
        for (name,) in cur.fetchall():
            cur.execute(f'DROP INDEX IF EXISTS "{name}"')
        self.built = {h for h in self.built if h[0] != kb.id}

    def close(self, db: Database) -> None:
        pass


def open_postgres(url: str, ann_min_chunks: int | None = None, cache_bytes: int | None = None,
                  keyword_index_max_chunks: int | None = None, cache: KBCache | None = None
                  ) -> SQLStore:
    """The store in the PostgreSQL database of ``url``; knowledge bases of ``ann_min_chunks``
    chunks or more (``?ann_min_chunks=N`` on the URL, default 100,000) searched through HNSW.
    The sizes not given are the URL's (``?cache_bytes=N``, ...) or the defaults."""
    dialect = PostgresDialect(url)
    given = {**OPTIONS, **url_options(dialect.target.options)}
    return SQLStore(dialect, given["ann_min_chunks"] if ann_min_chunks is None else ann_min_chunks,
                    given["cache_bytes"] if cache_bytes is None else cache_bytes,
                    given["keyword_index_max_chunks"] if keyword_index_max_chunks is None
                    else keyword_index_max_chunks, cache)


def _words(terms: list[str]) -> str:
    """The terms as a tsquery OR (``a | b``); empty when they hold no word."""
    return " | ".join(dict.fromkeys(w for t in terms for w in _TOKEN.findall(t.lower())))


def hnsw_name(kb: KnowledgeBase) -> str:
    return f"chunks_hnsw_{int(kb.id)}_{int(kb.config.dim)}"


def ann_sql(kb: KnowledgeBase) -> str:
    """Nearest chunks by the HNSW index's own expression. The ``kb_id`` is written into the
    statement, as in the index's predicate, so that the planner can prove the index applies
    (a parameter of another integer type would not match it)."""
    d = int(kb.config.dim)
    return (f"SELECT chunk_key, vector FROM chunks WHERE kb_id = {int(kb.id)} "
            f"ORDER BY vector::vector({d}) <=> %s::vector({d}) LIMIT %s")


def _register_vector(conn: Any) -> None:
    """Binary dump and load of pgvector values: ``>HH`` (dim, unused), then ``dim`` ``>f4``.
    The loader keeps the raw bytes; ``matrix`` decodes many rows at once."""
    from psycopg.adapt import Dumper, Loader
    from psycopg.pq import Format
    from psycopg.types import TypeInfo

    info = TypeInfo.fetch(conn, "vector")

    class VectorDumper(Dumper):
        format = Format.BINARY
        oid = info.oid

        def dump(self, obj: _Vector) -> bytes:
            return struct.pack(">HH", len(obj.row), 0) + obj.row.astype(">f4").tobytes()

    class VectorLoader(Loader):
        format = Format.BINARY

        def load(self, data: Any) -> bytes:
            return bytes(data)

    conn.adapters.register_dumper(_Vector, VectorDumper)
    conn.adapters.register_loader(info.oid, VectorLoader)


def from_url(url: str, cache: KBCache | None = None) -> SQLStore:
    """``postgresql://`` or ``postgres://user:pass@host:port/db?option=value``."""
    return open_postgres(url, cache=cache)
