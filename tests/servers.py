"""Database servers for the store tests, over real loopback connections.

MariaDB is the machine's own (127.0.0.1:3306, root, no password; ``.ci/run`` starts it when it
is down). PostgreSQL with pgvector is started once per session from the ``pgserver`` wheel on a
free port. Each test gets a database of its own, dropped afterwards. Without a server a test is
skipped on a developer's machine, but under CI it fails (``tests/envcheck.py``): CI never skips
them. A test marked ``unit`` (see conftest.py) that asks for a database fails: mark it ``server``.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import pytest

from tests.envcheck import unavailable

MARIADB = os.environ.get("CITEWISE_TEST_MYSQL", "mysql://root@127.0.0.1:3306/test")


def backends(*names: str) -> list[object]:
    """Fixture parameters for store backends: all but ``sqlite`` carry the ``server`` marker."""
    return [name if name == "sqlite" else pytest.param(name, marks=pytest.mark.server) for name in names]


def no_unit_test(request: pytest.FixtureRequest, what: str) -> None:
    """Fail a test classified ``unit`` that reaches ``what``: it lacks its ``server`` marker."""
    if request.node.get_closest_marker("unit"):
        pytest.fail(f"a unit test asked for {what}: mark it (or its parameter) @pytest.mark.server")


@pytest.fixture(scope="session")
def mariadb_admin() -> Iterator[object]:
    try:
        import pymysql

        from citewise.stores.urls import ServerURL

        t = ServerURL.parse(MARIADB)
        conn = pymysql.connect(host=t.host, port=t.port or 3306, user=t.user, password=t.password,
                               autocommit=True, connect_timeout=5)
    except Exception as e:  # any failure here means "no server"
        unavailable(f"MariaDB at {MARIADB} ({e})")
    yield conn
    conn.close()


@pytest.fixture(scope="session")
def pg_server() -> Iterator[object]:
    from citewise.testing.pgserver import start_pgvector

    try:
        server = start_pgvector()
    except Exception as e:
        unavailable(f"the pgvector test server ({e})")
    yield server
    server.stop()


@pytest.fixture
def mysql_database(mariadb_admin: object, request: pytest.FixtureRequest) -> Callable[[], object]:
    """A context manager giving the URL of a new, empty MySQL database, dropped on exit."""
    no_unit_test(request, "MariaDB")

    @contextmanager
    def fresh() -> Iterator[str]:
        name = f"cw_{uuid.uuid4().hex[:12]}"
        with mariadb_admin.cursor() as cur:
            cur.execute(f"CREATE DATABASE {name} CHARACTER SET utf8mb4")
        try:
            yield MARIADB.rsplit("/", 1)[0] + "/" + name
        finally:
            with mariadb_admin.cursor() as cur:
                cur.execute(f"DROP DATABASE IF EXISTS {name}")

    return fresh


@pytest.fixture
def pg_database(pg_server: object, request: pytest.FixtureRequest) -> Callable[[], object]:
    """A context manager giving the URL of a new, empty PostgreSQL database, dropped on exit."""
    no_unit_test(request, "PostgreSQL")
    import psycopg

    @contextmanager
    def fresh() -> Iterator[str]:
        name = f"cw_{uuid.uuid4().hex[:12]}"
        with psycopg.connect(pg_server.url(), autocommit=True) as admin:
            admin.execute(f"CREATE DATABASE {name}")
        try:
            yield pg_server.url(name)
        finally:
            with psycopg.connect(pg_server.url(), autocommit=True) as admin:
                admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")

    return fresh


def _opened(fresh: Callable[[], object], open_: Callable[[str], object]) -> Iterator[object]:
    with fresh() as url:
        store = open_(url)
        yield store
        store.close()


@pytest.fixture
def mysql_store(mysql_database: Callable[[], object]) -> Iterator[object]:
    from citewise.stores.mysql import open_mysql

    yield from _opened(mysql_database, open_mysql)


@pytest.fixture
def pg_store(pg_database: Callable[[], object]) -> Iterator[object]:
    from citewise.stores.postgres import open_postgres

    yield from _opened(pg_database, open_postgres)


def check_reconnects(store: object, kill: Callable[[], None]) -> None:
    """After the server drops the store's connection, reads and writes work again."""
    from citewise.testing import config, document

    kb = store.create_kb("kb", config())
    kill()
    assert store.get_kb("kb") == kb
    kill()
    assert store.put_document(kb, *document("a.md", "after the drop")) == "added"
    assert store.count_chunks(kb) == 1
