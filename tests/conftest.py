"""Fixtures for every test, and the split between unit tests and environment tests.

Fixtures: a SQLite store in a temp folder and an engine on it (here), the database servers
(``tests/servers.py``) and the HTTP service (``tests/api_fixtures.py``), loaded as plugins so
that no test file imports a fixture by name.

A test that needs MariaDB, PostgreSQL, Redis or Ray (``server``), headless Chromium
(``browser``), the local model (``model``, ``slow``), minutes of work (``big``) or a process,
a server, a deadline or megabytes of input (``heavy``) carries that marker (a test using a
server fixture gets ``server`` here); every other test is marked ``unit``. ``make unit`` runs
``pytest -m unit`` (in under a minute on 2 cores); a unit test that starts the local model or
a process, sleeps, or asks for a server database fails, saying which marker it lacks.

Any attempt to open a network connection to anything but this machine fails the test:
citewise must never reach the network unless a user configured a provider.
"""

from __future__ import annotations

import ipaddress
import os
import platform
import socket
import subprocess
import threading
import time
from pathlib import Path

import pytest

from citewise.embedders.local import LocalEmbedder
from citewise.engine import Engine
from citewise.reader import Reader
from citewise.stores.sql import SQLStore
from citewise.stores.sqlite import open_sqlite

pytest_plugins = ["tests.servers", "tests.api_fixtures"]

# the local model on ONNX Runtime in float32, on every host: tests compare its vectors with
# recorded ones to 1e-5; the other execution paths, and choosing among them, are tested by
# tests/test_embed_paths.py, which unsets this
os.environ.setdefault("CITEWISE_EMBED_PATH", "onnxruntime-fp32")

ENVIRONMENT = ("server", "browser", "model", "slow", "big", "heavy")
SERVER_FIXTURES = frozenset({"mariadb_admin", "pg_server", "mysql_database", "pg_database",
                             "mysql_store", "pg_store", "redis"})

_real_connect = socket.socket.connect


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if SERVER_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.server)
        if not any(item.get_closest_marker(name) for name in ENVIRONMENT):
            item.add_marker(pytest.mark.unit)


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
def no_state_in_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """What the CLI keeps between runs (``chat``'s conversation) goes to the test's folder."""
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))


@pytest.fixture(autouse=True)
def no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(socket.socket, "connect", _local_only)


def _model_in_a_unit_test(*args: object, **kw: object) -> None:
    pytest.fail("a unit test ran the local model: mark it @pytest.mark.model")


def _process_in_a_unit_test(*args: object, **kw: object) -> None:
    pytest.fail("a unit test started a process: mark it @pytest.mark.heavy")


platform.processor()  # the openai SDK's headers ask for it once, from a `uname -p` process: now
_sleep = time.sleep
SLEEP_IN_A_UNIT_TEST = 0.05  # seconds: a poll's tick is allowed, a longer wait is not


def _short_sleep(seconds: float) -> None:
    if seconds > SLEEP_IN_A_UNIT_TEST and threading.current_thread() is threading.main_thread():
        pytest.fail(f"a unit test slept {seconds} s: mark it @pytest.mark.heavy, or inject the sleep")
    _sleep(seconds)


@pytest.fixture(autouse=True)
def unit_tests_run_no_model(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """A unit test runs no model, starts no process and does not wait."""
    if request.node.get_closest_marker("unit"):
        monkeypatch.setattr(LocalEmbedder, "_run", _model_in_a_unit_test)
        monkeypatch.setattr(Reader, "_logits", _model_in_a_unit_test)
        monkeypatch.setattr(subprocess.Popen, "_execute_child", _process_in_a_unit_test)
        monkeypatch.setattr(time, "sleep", _short_sleep)


@pytest.fixture
def store(tmp_path: Path) -> SQLStore:
    s = open_sqlite(tmp_path / "test.db")
    yield s
    s.close()


@pytest.fixture
def engine(store: SQLStore) -> Engine:
    return Engine(store)


@pytest.fixture(autouse=True)
def no_user_config(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """The user's own ~/.config/citewise/citewise.toml never reaches a test."""
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path_factory.mktemp("xdg-config")))
