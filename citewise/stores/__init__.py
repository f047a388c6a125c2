"""Stores chosen by URL: ``sqlite:///kb.db`` (default), a bare path meaning the same;
``mysql://user:pass@host:port/db`` (or ``mariadb://``) and ``postgresql://...`` (or
``postgres://``) for the server stores. A ``+driver`` suffix on the scheme is ignored.

A SQLite or PostgreSQL URL may carry ``?ann_min_chunks=N``: knowledge bases of at least N
chunks are searched through an HNSW index instead of exactly (default 100,000).
"""

from __future__ import annotations

from collections.abc import Callable

from ..errors import ConfigError, UnknownNameError
from .base import DenseIndex, DocumentInfo
from .roles import Content, QueryLog, Search, Sentences, Shadows, Store

DEFAULT_DB = "citewise.db"


def _sqlite(rest: str) -> Store:
    from urllib.parse import parse_qs

    from .sql import ann_option
    from .sqlite import open_sqlite

    path, _, query = rest.partition("?")
    options = parse_qs(query)
    unknown = set(options) - {"ann_min_chunks"}
    if unknown:
        raise ConfigError(f"Unknown SQLite store option(s) {sorted(unknown)}; valid: ann_min_chunks")
    return open_sqlite(path or DEFAULT_DB, ann_option(options.get("ann_min_chunks", [None])[-1]))


def _mysql(url: str) -> Store:
    from .mysql import open_mysql

    return open_mysql(url)


def _postgres(url: str) -> Store:
    from .postgres import open_postgres

    return open_postgres(url)


REGISTRY: dict[str, Callable[[str], Store]] = {
    "sqlite": _sqlite,
    "mysql": _mysql,
    "mariadb": _mysql,
    "postgresql": _postgres,
    "postgres": _postgres,
}


def open_store(url: str = DEFAULT_DB) -> Store:
    """Open the store a URL names; a plain path is a SQLite file."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        return _sqlite(url)
    factory = REGISTRY.get(scheme.split("+")[0])
    if factory is None:
        raise UnknownNameError("store", scheme, list(REGISTRY))
    if scheme == "sqlite":
        rest = rest[1:] if rest.startswith("/") else rest
    return factory(rest if scheme == "sqlite" else url)


__all__ = ["DEFAULT_DB", "REGISTRY", "Content", "DenseIndex", "DocumentInfo", "QueryLog", "Search",
           "Sentences", "Shadows", "Store", "open_store"]
