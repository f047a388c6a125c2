"""A caller spreading requests over every server process still gets only its key's rate.

Two uvicorn processes on one SQLite file, counting in the store and then in Redis, answer a
5-a-minute key exactly 5 times between them; four connections to one MySQL or PostgreSQL
database do the same through the store's ``rate_windows`` table. Every backend decides a
scripted sequence of requests exactly as ``admit`` does. When Redis fails, the service goes on
answering and limiting (counted in the store) and says so once in its log.

Redis is the machine's own (127.0.0.1:6379, ``CITEWISE_TEST_REDIS`` to change it); each test
writes under a prefix of its own and deletes its keys afterwards. Without Redis a test is
skipped on a developer's machine and fails under CI, like the database servers' tests.
"""

from __future__ import annotations

import logging
import os
import shutil
import sqlite3
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack, closing, contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient

from citewise.errors import RateLimitError
from citewise.ratelimit import RateLimiter, RedisWindows, StoreWindows, admit
from citewise.stores import open_store
from tests.api_fixtures import ADMIN, ADMIN_KEY, make_app, settings_for, tenant
from tests.envcheck import unavailable
from tests.live import free_port, server_process, stop
from tests.servers import backends

ROOT = Path(__file__).resolve().parent.parent
REDIS = os.environ.get("CITEWISE_TEST_REDIS", "redis://127.0.0.1:6379/0")
RATE = 5
ATTEMPTS = 16
START_TIMEOUT = 60.0
T0 = 1_800_000_000.0  # a fixed clock (seconds since the epoch) for the scripted tests


@pytest.fixture(name="redis")
def redis_fixture() -> Iterator[tuple[Any, str]]:
    """A client of the test Redis and a key prefix of this test's own, cleaned up afterwards."""
    try:
        import redis

        client = redis.Redis.from_url(REDIS, socket_connect_timeout=2)
        client.ping()
    except Exception as e:  # no package, no server: either way no Redis
        unavailable(f"Redis at {REDIS} ({e})")
    prefix = f"cwtest:{uuid.uuid4().hex[:12]}:"
    yield client, prefix
    for key in client.scan_iter(match=prefix + "*"):
        client.delete(key)
    client.close()


@contextmanager
def uvicorn_process(db: Path, workdir: Path, **env: str) -> Iterator[httpx.Client]:
    """``uvicorn --factory citewise.server:create_app`` in a process of its own on loopback."""
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    environ = {**os.environ, "CITEWISE_DB": str(db), "CITEWISE_ADMIN_KEY": ADMIN_KEY,
               "CITEWISE_EMBEDDER": "hashing:256", "CITEWISE_COMPUTE_SLOTS": "1",
               "PYTHONPATH": path, **env}
    command = [sys.executable, "-m", "uvicorn", "--factory", "citewise.server:create_app",
               "--host", "127.0.0.1", "--port", "{port}", "--log-level", "warning"]
    with server_process(command, workdir, environ, "uvicorn", START_TIMEOUT) as client:
        yield client


def new_key(client: httpx.Client, name: str, rate: int) -> dict[str, str]:
    assert client.post("/v1/admin/tenants", json={"name": name}, headers=ADMIN).status_code == 201
    r = client.post(f"/v1/admin/tenants/{name}/keys", json={"rate_per_minute": rate}, headers=ADMIN)
    assert r.status_code == 201, r.text
    return {"Authorization": f"Bearer {r.json()['key']}"}


def flood_two(tmp_path: Path, **env: str) -> None:
    """``ATTEMPTS`` requests of one 5-a-minute key, at once, half to each of two processes."""
    db = tmp_path / "shared.db"
    with ExitStack() as stack:
        servers = [stack.enter_context(uvicorn_process(db, tmp_path, **env)) for _ in range(2)]
        who = new_key(servers[0], "flood", RATE)
        with ThreadPoolExecutor(8) as pool:
            answers = list(pool.map(lambda i: servers[i % 2].get("/v1/kbs", headers=who),
                                    range(ATTEMPTS)))
        codes = [r.status_code for r in answers]
        assert codes.count(200) == RATE and codes.count(429) == ATTEMPTS - RATE, codes
        for r in answers:
            if r.status_code == 429:  # the next token is at most 60/5 s away
                assert 1 <= int(r.headers["Retry-After"]) <= 60 // RATE
                assert "retry after" in r.json()["detail"]
        for server in servers:  # both are still limiting, and only this key
            assert server.get("/v1/kbs", headers=who).status_code == 429
            assert server.get("/v1/kbs", headers=new_key(server, f"calm{id(server)}", RATE)
                              ).status_code == 200


def rate_rows(db: Path) -> list[tuple[str, int]]:
    with closing(sqlite3.connect(db)) as conn:
        return conn.execute("SELECT name, booked_until FROM rate_windows").fetchall()


@pytest.mark.heavy
def test_two_processes_on_one_sqlite_file_share_the_limit(tmp_path: Path) -> None:
    flood_two(tmp_path)
    assert len(rate_rows(tmp_path / "shared.db")) == 3  # counted in the store: three keys


def test_two_processes_share_the_limit_through_redis(tmp_path: Path,
                                                     redis: tuple[Any, str]) -> None:
    client, prefix = redis
    flood_two(tmp_path, CITEWISE_REDIS_URL=REDIS, CITEWISE_REDIS_PREFIX=prefix)
    assert len(list(client.scan_iter(match=prefix + "rate:*"))) == 3  # counted in Redis
    assert rate_rows(tmp_path / "shared.db") == []  # and not in the store


@pytest.fixture(name="store_url", params=backends("sqlite", "mysql", "postgres"))
def store_url_fixture(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """The URL of a fresh store of each backend (``mysql_store``, ``pg_store`` of servers.py)."""
    if request.param == "sqlite":
        return str(tmp_path / "rates.db")
    return request.getfixturevalue({"mysql": "mysql_store", "postgres": "pg_store"}[request.param]).url


def test_connections_of_one_store_share_the_limit(store_url: str) -> None:
    """Four limiters, each on its own connection (as four processes would be), 20 requests at
    once on a stopped clock: exactly 5 pass, through the store's row lock alone."""
    stores = [open_store(store_url) for _ in range(4)]
    limiters = [RateLimiter(StoreWindows(lambda s=s: s), clock=lambda: T0) for s in stores]
    start = threading.Barrier(len(limiters))

    def attempts(limiter: RateLimiter) -> list[bool]:
        start.wait()
        passed = []
        for _ in range(5):
            try:
                limiter.check("7.cw_hostile", RATE)
                passed.append(True)
            except RateLimitError as e:
                assert e.retry_after == 60 // RATE
                passed.append(False)
        return passed

    try:
        with ThreadPoolExecutor(len(limiters)) as pool:
            results = [p for ps in pool.map(attempts, limiters) for p in ps]
    finally:
        for s in stores:
            s.close()
    assert results.count(True) == RATE and len(results) == 20


# (seconds after T0, rate per minute, the Retry-After expected; 0: passes)
SCRIPT = [
    (0, 3, 0), (0, 3, 0), (0, 3, 0), (0, 3, 20),  # a burst of the whole rate, then a wait
    (20, 3, 0), (20, 3, 20),  # one token back every 20 s
    (39.5, 3, 1), (40, 3, 0),  # a part second is a whole one
    (400, 3, 0), (400, 3, 0), (400, 3, 0), (400, 3, 20),  # idle time saves no more than the rate
    *[(0, 7, 0)] * 7, (0, 7, 9), (8.6, 7, 0),  # 60/7 s is not whole
]


def run_script(windows: Any, name: str) -> list[int]:
    names = {3: name + ".three", 7: name + ".seven"}
    return [windows.take(names[rate], rate, round((T0 + t) * 1_000_000)).retry_after
            for t, rate, _ in SCRIPT]


def test_the_rule_is_a_token_bucket() -> None:
    booked = {3: 0, 7: 0}
    waits = []
    for t, rate, _ in SCRIPT:
        decision = admit(booked[rate], round((T0 + t) * 1_000_000), rate)
        booked[rate] = decision.booked_until
        waits.append(decision.retry_after)
    assert waits == [wait for _, _, wait in SCRIPT]


def test_every_backend_decides_as_the_rule(store_url: str, redis: tuple[Any, str]) -> None:
    client, prefix = redis
    store = open_store(store_url)
    try:
        expected = [wait for _, _, wait in SCRIPT]
        assert run_script(StoreWindows(lambda: store), "store") == expected
        windows = RedisWindows(REDIS, prefix, fallback=StoreWindows(lambda: store))
        assert run_script(windows, "redis") == expected
        assert store.db.rows("SELECT name FROM rate_windows ORDER BY name") == [
            ("store.seven",), ("store.three",)]  # Redis answered every one
        windows.close()
    finally:
        store.close()
    assert {k.decode() for k in client.scan_iter(match=prefix + "*")} == {
        prefix + "rate:redis.three", prefix + "rate:redis.seven"}


def test_without_redis_the_store_counts_and_the_log_says_so(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    down = f"redis://127.0.0.1:{free_port()}/0"  # nothing listens there
    settings = settings_for(tmp_path / "api.db", redis_url=down)
    with caplog.at_level(logging.WARNING, logger="citewise.ratelimit"), \
            TestClient(make_app(settings)) as client:
        slow = tenant(client, "slow", rate_per_minute=3)
        codes = [client.get("/v1/kbs", headers=slow.headers).status_code for _ in range(5)]
    assert codes == [200, 200, 200, 429, 429]
    warnings = [r.getMessage() for r in caplog.records if r.name == "citewise.ratelimit"]
    assert len(warnings) == 1 and "counted in the store" in warnings[0]
    assert down in warnings[0]
    assert len(rate_rows(tmp_path / "api.db")) == 1


@contextmanager
def own_redis(port: int) -> Iterator[Any]:
    """A redis-server of this test's own on ``port`` (keeps nothing on disk), stopped at the end."""
    import redis

    if not shutil.which("redis-server"):
        unavailable("redis-server (Debian's redis-server package)")
    proc = subprocess.Popen(["redis-server", "--bind", "127.0.0.1", "--port", str(port), "--save", "",
                             "--appendonly", "no"], stdout=subprocess.DEVNULL)
    client = redis.Redis(port=port, socket_connect_timeout=1)
    try:
        for _ in range(100):
            try:
                client.ping()
                break
            except redis.ConnectionError:
                time.sleep(0.05)
        yield client
    finally:
        client.close()
        stop(proc)


@pytest.mark.server  # starts a redis-server of its own
def test_redis_down_counts_in_the_store_and_back_in_redis(
        store: Any, redis: tuple[Any, str], caplog: pytest.LogCaptureFixture) -> None:
    """A Redis of the test's own, stopped and started again; ``redis`` only makes sure of the
    package (and fails the test under CI without it)."""
    port, later = free_port(), [0.0]
    windows = RedisWindows(f"redis://127.0.0.1:{port}/0", "", fallback=StoreWindows(lambda: store),
                           monotonic=lambda: later[0])
    now = round(T0 * 1_000_000)

    def counted() -> tuple[list[tuple[Any, ...]], bytes | None]:
        return store.db.rows("SELECT booked_until FROM rate_windows"), client.get("rate:k")

    with caplog.at_level(logging.WARNING, logger="citewise.ratelimit"):
        with own_redis(port) as client:
            assert windows.take("k", 3, now).retry_after == 0
            assert counted() == ([], str(now + 20_000_000).encode())
        assert windows.take("k", 3, now).retry_after == 0  # Redis is down: the store counts
        with own_redis(port) as client:  # back, but not tried again for 5 s
            assert windows.take("k", 3, now).retry_after == 0
            assert counted() == ([(now + 40_000_000,)], None)
            later[0] = 5.0
            assert windows.take("k", 3, now).retry_after == 0  # counted in Redis again
            assert counted() == ([(now + 40_000_000,)], str(now + 20_000_000).encode())
    windows.close()
    said = [r.getMessage() for r in caplog.records if r.name == "citewise.ratelimit"]
    assert len(said) == 2 and "counted in the store" in said[0] and "answers again" in said[1]
