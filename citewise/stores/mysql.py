"""MySQL 8+ and MariaDB 10.6+: vectors beside the content, InnoDB FULLTEXT for keywords.

``mysql://user:pass@host:port/db`` (``mariadb://`` means the same), driven by PyMySQL (pure
Python: no client headers needed); this is its ``Dialect`` for ``SQLStore``. A chunk row
holds its text, its vector as float32 bytes and its keyword words, so one InnoDB transaction
writes content, vector and full-text index together. Dense search is exact cosine over the
knowledge base's matrix, fetched in one statement and cached until its version changes.

The keyword side is InnoDB FULLTEXT, scoped inside the index itself: each word is written
with the knowledge base's prefix (``k7xnicotin``), so a term's posting list holds only that
knowledge base's rows. Plain ``kb_id = %s AND MATCH(...)`` was measured ~100 ms per query
with 200 tenants sharing a vocabulary, because InnoDB reads every tenant's postings for a
common word before filtering; with the prefix it is a few ms at any tenant count, and the
term statistics are per knowledge base too. ``kb_id = %s`` stays in the statement, so the
wall holds even for a document that contains another prefix. Words are lower-cased, stop
words dropped and suffixes stripped by citewise's own light stemmer on both sides, so
InnoDB's ``innodb_ft_min_token_size`` and stopword list never apply. InnoDB ranks by its own
TF-IDF, not BM25. A search restricted to chunks holding one of some words (``within``,
``citewise/search/keywords.py``) is boolean mode ``+(rare words) common words``: the same scores for
the rows it returns, ranking 3.5x fewer rows on ``benchmarks/stores.py``'s 50,000 chunks.

Servers with a native VECTOR type (MariaDB 11.7+, MySQL 9) are detected
(``server_info["native_vector"]``) but their type is not used: a VECTOR column has one fixed
dimension, and one table holds knowledge bases of every embedder; exact search on the cached
matrix already meets the latency target (``benchmarks/stores.py``).
"""

from __future__ import annotations

import functools
import logging
import re
from typing import Any

import numpy as np

from citewise.errors import StoreError
from citewise.kb import KnowledgeBase
from citewise.records import Chunk
from citewise.sentences import STOP_WORDS, stem
from citewise.stores.dialect import CHUNK_COLUMNS, Dialect, Read, chunk_values, keyword_body
from citewise.stores.kb_cache import KBCache
from citewise.stores.sql import OPTIONS, SQLStore, url_options
from citewise.stores.urls import ServerURL, redact

log = logging.getLogger(__name__)

_TOKEN = re.compile(r"[^\W_]+")
_stem = functools.lru_cache(maxsize=1 << 16)(stem)


def _driver() -> Any:
    try:
        import pymysql
    except ImportError:
        raise StoreError("The MySQL store needs PyMySQL: pip install 'citewise[server]'") from None
    return pymysql


def parse_version(text: str) -> tuple[str, tuple[int, ...]]:
    """``("mariadb", (10, 11, 19))`` from ``SELECT VERSION()``."""
    flavour = "mariadb" if "mariadb" in text.lower() else "mysql"
    numbers = re.match(r"(\d+)\.(\d+)\.(\d+)", text)
    return flavour, tuple(int(n) for n in numbers.groups()) if numbers else (0, 0, 0)


class MySQLDialect(Dialect):
    name = "mysql"
    # the chunk key is InnoDB's full-text document id: ranking needs no row look-ups (measured
    # 7x faster at 50,000 chunks than a separate key column)
    key = "FTS_DOC_ID"
    # by key through the unique index: with only ``kb_id`` known to the optimizer's stale
    # statistics it chose to read the whole knowledge base (580 ms at 50,000 chunks)
    chunks_from = "chunks FORCE INDEX (FTS_DOC_ID_INDEX)"
    # DDL commits implicitly in MySQL, so the lock is a named server lock, not a row lock
    around_migrations = ("SELECT GET_LOCK('citewise_migrate', 60)",
                         "SELECT RELEASE_LOCK('citewise_migrate')")
    claim_rate = ("INSERT INTO rate_windows (name, booked_until) VALUES (%s, 0) "
                  "ON DUPLICATE KEY UPDATE booked_until = booked_until")
    # both read the statement's start: no conversion through the session's time zone (which
    # UNIX_TIMESTAMP(NOW(6)) makes, ambiguous in the hour a daylight-saving change repeats)
    clock = "(UNIX_TIMESTAMP() + MICROSECOND(NOW(6)) / 1e6)"

    def __init__(self, url: str) -> None:
        self.errors = (_driver().MySQLError,)
        self.url = redact(url)
        self.target = ServerURL.parse(url)
        self.max_token = 84
        self.server_info: dict[str, Any] = {}

    def connect(self) -> Any:
        t = self.target
        conn = _driver().connect(
            host=t.host, port=t.port or 3306, user=t.user or "root", password=t.password,
            database=t.database, charset="utf8mb4", autocommit=True,
            connect_timeout=int(t.options.get("connect_timeout", 10)),
        )
        with conn.cursor() as cur:
            cur.execute("SELECT VERSION(), @@innodb_ft_max_token_size")
            version, self.max_token = cur.fetchone()
        flavour, numbers = parse_version(version)
        native = numbers >= ((11, 7) if flavour == "mariadb" else (9, 0))
        self.server_info = {"flavour": flavour, "version": version, "native_vector": native}
        if native:
            log.info("%s %s has a native VECTOR type; citewise keeps float32 bytes and exact "
                     "search so one table serves every embedding dimension", flavour, version)
        return conn

    def alive(self, conn: Any) -> bool:
        return bool(conn.open)

    def begin(self, conn: Any, write: bool = True) -> Any:
        cur = conn.cursor()
        cur.execute("START TRANSACTION")  # InnoDB's repeatable read: a snapshot for reads too
        return cur

    def insert_chunks(self, cur: Any, kb: KnowledgeBase, doc_id: str, chunks: list[Chunk],
                      vectors: np.ndarray) -> None:
        cur.executemany(
            f"INSERT INTO chunks ({CHUNK_COLUMNS}, keywords, vector) VALUES ({', '.join(['%s'] * 9)})",
            [(*chunk_values(kb, doc_id, c), " ".join(self._scoped(kb, [keyword_body(c)])), v.tobytes())
             for c, v in zip(chunks, vectors, strict=True)],
        )

    def _scoped(self, kb: KnowledgeBase, texts: list[str]) -> list[str]:
        """``k<id>x`` + stem for each content word: one full-text token per word, per tenant."""
        prefix = f"k{kb.id}x"
        words = (_stem(w) for t in texts for w in _TOKEN.findall(t.lower()) if w not in STOP_WORDS)
        return [prefix + w for w in words if len(prefix) + len(w) <= self.max_token]

    def keyword(self, read: Read, kb: KnowledgeBase, terms: list[str], k: int,
                within: list[str] | None) -> list[tuple[int, float]]:
        words = list(dict.fromkeys(self._scoped(kb, terms)))
        if not words:
            return []
        if within is None:
            # natural language mode: the same OR of terms and the same scores as boolean mode
            # (checked on 20 questions), 2-3x faster at 50,000 chunks, and no operators to parse
            against, mode = " ".join(words), "NATURAL LANGUAGE"
        else:
            # boolean mode: ``+(a b) c d`` holds a or b; c and d only add to the score
            picked = set(self._scoped(kb, [t for t in within if t in terms]))
            if not picked:
                return []
            against = f"+({' '.join(w for w in words if w in picked)}) " + " ".join(
                w for w in words if w not in picked)
            mode = "BOOLEAN"
        match = f"MATCH (keywords) AGAINST (%s IN {mode} MODE)"
        # ranked and cut to k first: with ``kb_id = %s`` beside MATCH, InnoDB reads every
        # matching row before sorting (measured 3x slower at 50,000 chunks); the prefixes
        # already scope the terms, and the outer ``kb_id = %s`` keeps the wall regardless
        rows = read(
            f"SELECT FTS_DOC_ID, score FROM (SELECT FTS_DOC_ID, kb_id, {match} AS score "
            f"FROM chunks WHERE {match} ORDER BY score DESC LIMIT %s) AS top "
            "WHERE kb_id = %s ORDER BY score DESC, FTS_DOC_ID",
            (against, against, int(k), kb.id),
        )
        return [(int(r[0]), float(r[1])) for r in rows]

    def term_count(self, read: Read, kb: KnowledgeBase, term: str, cap: int) -> int:
        words = list(dict.fromkeys(self._scoped(kb, [term])))
        if not words:
            return 0
        return int(read(
            "SELECT count(*) FROM (SELECT 1 FROM chunks WHERE MATCH (keywords) AGAINST "
            "(%s IN BOOLEAN MODE) AND kb_id = %s LIMIT %s) AS hit",
            (" ".join(words), kb.id, int(cap)),
        )[0][0])


def open_mysql(url: str, cache_bytes: int | None = None,
               keyword_index_max_chunks: int | None = None, cache: KBCache | None = None
               ) -> SQLStore:
    """The store in the MySQL or MariaDB database of ``url``; the sizes not given are the
    URL's (``?cache_bytes=N&keyword_index_max_chunks=N``) or the defaults."""
    dialect = MySQLDialect(url)
    given = {**OPTIONS, **url_options(dialect.target.options)}
    return SQLStore(dialect, cache_bytes=given["cache_bytes"] if cache_bytes is None else cache_bytes,
                    keyword_index_max_chunks=given["keyword_index_max_chunks"]
                    if keyword_index_max_chunks is None else keyword_index_max_chunks, cache=cache)


def from_url(url: str, cache: KBCache | None = None) -> SQLStore:
    """``mysql://`` or ``mariadb://user:pass@host:port/db?option=value``."""
    return open_mysql(url, cache=cache)
