"""Tiny fixtures: a SQLite store in a temp folder and knowledge bases on the hashing embedder.

Any attempt to open a network connection to anything but this machine fails the test:
citewise must never reach the network unless a user configured a provider.
"""

from __future__ import annotations

import ipaddress
import socket
from pathlib import Path

import pytest

from citewise.engine import Engine
from citewise.kb import KBConfig
from citewise.stores.sqlite import SQLiteStore
from tests.servers import (  # noqa: F401  the server fixtures, shared by every store test
    mariadb_admin,
    mysql_database,
    mysql_store,
    pg_database,
    pg_server,
    pg_store,
)

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "examples" / "smoking-cessation"
SAMPLE_QUERIES = ROOT / "examples" / "queries"

_real_connect = socket.socket.connect


def _local_only(self: socket.socket, address: object) -> object:
    host = address[0] if isinstance(address, tuple) else None
    if host is not None:
        try:
            if not ipaddress.ip_address(host).is_loopback:
                raise RuntimeError(f"test tried to reach the network: {address}")
        except ValueError:
            if host not in ("localhost",):
                raise RuntimeError(f"test tried to reach the network: {address}") from None
    return _real_connect(self, address)


@pytest.fixture(autouse=True)
def no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(socket.socket, "connect", _local_only)


@pytest.fixture
def store(tmp_path: Path) -> SQLiteStore:
    s = SQLiteStore(tmp_path / "test.db")
    yield s
    s.close()


@pytest.fixture
def engine(store: SQLiteStore) -> Engine:
    return Engine(store)


def hashing_config(**kw: object) -> KBConfig:
    return KBConfig(embedder="hashing:256", dim=256, **kw)  # type: ignore[arg-type]
