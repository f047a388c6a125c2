"""Stores chosen by URL: ``sqlite:///kb.db`` (default), a bare path meaning the same;
``mysql://user:pass@host:port/db`` (or ``mariadb://``) and ``postgresql://...`` (or
``postgres://``) for the server stores. A ``+driver`` suffix on the scheme is ignored.

A SQLite or PostgreSQL URL may carry ``?ann_min_chunks=N``: knowledge bases of at least N
chunks are searched through an HNSW index instead of exactly (default 100,000).
"""

from __future__ import annotations

from collections.abc import Callable

from ..errors import UnknownNameError
from .base import DenseIndex, DocumentInfo, Store

DEFAULT_DB = "citewise.db"


def _sqlite(rest: str) -> Store:
    from urllib.parse import parse_qs

    from ..errors import ConfigError
    from .sqlite import ANN_MIN_CHUNKS, SQLiteStore

    path, _, query = rest.partition("?")
    options = parse_qs(query)
    unknown = set(options) - {"ann_min_chunks"}
    if unknown:
        raise ConfigError(f"Unknown SQLite store option(s) {sorted(unknown)}; valid: ann_min_chunks")
    try:
        ann_min = int(options.get("ann_min_chunks", [ANN_MIN_CHUNKS])[-1])
    except ValueError:
        raise ConfigError("ann_min_chunks must be a whole number of chunks") from None
    return SQLiteStore(path or DEFAULT_DB, ann_min_chunks=ann_min)


def _mysql(url: str) -> Store:
    from .mysql import MySQLStore

    return MySQLStore(url)


def _postgres(url: str) -> Store:
    from .postgres import PostgresStore

    return PostgresStore(url)


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


__all__ = ["DEFAULT_DB", "REGISTRY", "DenseIndex", "DocumentInfo", "Store", "open_store"]
