"""Stores chosen by URL: ``sqlite:///kb.db`` (default), a bare path meaning the same;
``mysql://user:pass@host:port/db`` (or ``mariadb://``) and ``postgresql://...`` (or
``postgres://``) for the server stores. A ``+driver`` suffix on the scheme
(``mysql+pymysql://``, as SQLAlchemy writes it) is accepted and ignored: the driver is citewise's.

Sizes are options on the URL (``sqlite:///kb.db?cache_bytes=1073741824``), on every backend:

- ``ann_min_chunks`` (SQLite and PostgreSQL): knowledge bases of at least N chunks are
  searched through an HNSW index instead of exactly (default 100,000);
- ``cache_bytes``: the memory one process keeps of knowledge bases for search, their dense
  matrices and in-memory keyword indexes together, least recently used out first (default
  512 MiB; ``kb_cache.py``);
- ``keyword_index_max_chunks``: knowledge bases of up to N chunks are keyword-searched through
  an in-memory BM25 index (``keyword_index.py``), larger ones (and those searched through HNSW)
  by the database's full-text index (default 100,000; 0: always the database's).

``open_store(url, cache=other.cache)`` opens a store that shares another's ``KBCache`` (the
HTTP service's worker threads on one database do).
"""

from __future__ import annotations

from collections.abc import Callable

from citewise.errors import UnknownNameError
from citewise.registry import Registry
from citewise.stores.base import DenseIndex, DocumentInfo
from citewise.stores.kb_cache import KBCache
from citewise.stores.roles import Content, QueryLog, Search, Sentences, Shadows, Store

DEFAULT_DB = "citewise.db"


# the backends by URL scheme: entry points of citewise.stores (citewise's own in pyproject.toml)
REGISTRY: Registry[Callable[[str, KBCache | None], Store]] = Registry("citewise.stores")


def open_store(url: str = DEFAULT_DB, cache: KBCache | None = None) -> Store:
    """Open the store a URL names; a plain path is a SQLite file. ``cache``: another store's
    on the same database, to share (a new one of the URL's ``cache_bytes`` otherwise)."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        return REGISTRY["sqlite"](url, cache)
    scheme = scheme.split("+")[0]  # mysql+pymysql:// as SQLAlchemy writes it: the driver is ours
    url = f"{scheme}://{rest}"
    factory = REGISTRY.get(scheme)
    if factory is None:
        raise UnknownNameError("store", scheme, list(REGISTRY))
    if scheme == "sqlite":
        rest = rest[1:] if rest.startswith("/") else rest
    return factory(rest if scheme == "sqlite" else url, cache)


__all__ = ["DEFAULT_DB", "REGISTRY", "Content", "DenseIndex", "DocumentInfo", "QueryLog", "Search",
           "Sentences", "Shadows", "Store", "open_store"]
