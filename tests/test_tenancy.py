"""Tenants below the HTTP layer and around it: the rate limiter, origins, the tenant commands,
and the HTTP service's tenant-wall tests run again with its store on each server (on SQLite
they run in test_api_isolation.py). The store's own tenant tests (keys, knowledge bases per
tenant, the m011 upgrade) are ``citewise.testing.TenantConformance`` and
``SQLTablesConformance``, run on every backend by test_store_*.py."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from citewise.cli import app
from citewise.errors import ConfigError, RateLimitError
from citewise.ratelimit import RateLimiter, StoreWindows
from citewise.server import Settings
from citewise.stores import open_store
from citewise.stores.roles import Store
from citewise.stores.tenants import OneTenant
from citewise.tenancy import check_origin
from citewise.testing import ContentConformance, config
from tests.api_fixtures import ADMIN_KEY, make_app
from tests.servers import backends
from tests.test_api_isolation import (  # noqa: F401  collected again here, on the server stores
    test_a_widget_key_asks_one_kb_from_its_origins_only,
    test_another_tenants_kb_looks_exactly_like_a_missing_one,
    test_chunk_ids_and_query_ids_of_another_tenant_are_not_found,
    test_same_kb_name_in_two_tenants_never_mixes,
)

STORES = {"sqlite": "store", "mysql": "mysql_store", "pg": "pg_store"}


@pytest.fixture(params=backends("sqlite", "mysql", "pg"))
def any_store(request: pytest.FixtureRequest) -> Store:
    return request.getfixturevalue(STORES[request.param])


@pytest.fixture(params=backends("mysql", "pg"))
def client(request: pytest.FixtureRequest) -> Iterator[TestClient]:
    """The HTTP service on a server store, for the wall tests collected above."""
    with request.getfixturevalue(f"{request.param}_database")() as url:
        settings = Settings(db=url, admin_key=ADMIN_KEY, embedder="hashing:256")
        with TestClient(make_app(settings)) as c:
            yield c


def test_rate_limiter_is_a_token_bucket_per_key(any_store: Store) -> None:
    now = [1_000.0]
    limiter = RateLimiter(StoreWindows(lambda: any_store), clock=lambda: now[0])
    for _ in range(3):
        limiter.check("1", 3)
    with pytest.raises(RateLimitError) as raised:
        limiter.check("1", 3)
    assert raised.value.retry_after == 20
    limiter.check("2", 3)  # another key has its own bucket
    now[0] = 1_020.0
    limiter.check("1", 3)
    with pytest.raises(RateLimitError):
        limiter.check("1", 3)


def test_origins_must_be_exact() -> None:
    assert check_origin("https://Shop.example.com:8443") == "https://shop.example.com:8443"
    for bad in ("shop.example.com", "https://shop.example.com/", "ftp://x", "https://", " https://a"):
        with pytest.raises(ConfigError, match="scheme://host"):
            check_origin(bad)


def test_tenant_commands(tmp_path: Path) -> None:
    runner = CliRunner()
    db = str(tmp_path / "t.db")
    assert "Created tenant acme" in runner.invoke(app, ["--db", db, "tenant", "create", "acme"]).output
    r = runner.invoke(app, ["--db", db, "tenant", "key", "acme", "--widget", "--kb", "docs",
                            "--origin", "https://shop.example.com", "--json"])
    made = json.loads(r.output)
    assert made["kind"] == "widget" and made["origins"] == ["https://shop.example.com"]
    store = open_store(db)
    assert store.tenants.key_for_token(made["key"]).id == made["id"]
    store.close()
    listed = runner.invoke(app, ["--db", db, "tenant", "keys", "acme"]).output
    assert made["key"] not in listed and made["prefix"] in listed
    r = runner.invoke(app, ["--db", db, "tenant", "key", "acme", "--kb", "docs"])
    assert r.exit_code == 1 and "belong to widget keys" in str(r.exception)
    assert "Revoked key 1" in runner.invoke(app, ["--db", db, "tenant", "revoke", "acme", "1"]).output
    listed = json.loads(runner.invoke(app, ["--db", db, "tenant", "list", "--json"]).output)
    assert listed[0]["name"] == "acme"


def test_serve_refuses_to_start_without_an_admin_key(tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CITEWISE_ADMIN_KEY", raising=False)
    monkeypatch.setenv("CITEWISE_DB", "restored-after-the-test.db")  # serve sets it
    monkeypatch.chdir(tmp_path)
    r = CliRunner().invoke(app, ["--db", str(tmp_path / "s.db"), "serve"])
    assert r.exit_code == 1 and "CITEWISE_ADMIN_KEY" in str(r.exception)


def test_serve_gives_each_worker_its_share_of_the_cores(tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    import uvicorn

    ran: dict[str, object] = {}
    monkeypatch.setattr(uvicorn, "run", lambda *a, **kw: ran.update(kw))
    monkeypatch.setenv("CITEWISE_ADMIN_KEY", ADMIN_KEY)
    monkeypatch.setenv("CITEWISE_DB", "restored-after-the-test.db")  # serve sets both
    monkeypatch.setenv("CITEWISE_WORKERS", "1")
    monkeypatch.setattr("os.cpu_count", lambda: 4)
    monkeypatch.chdir(tmp_path)
    r = CliRunner().invoke(app, ["--db", str(tmp_path / "s.db"), "serve", "--workers", "2"])
    assert r.exit_code == 0 and ran["workers"] == 2
    assert Settings().slots == 2  # what each worker process reads from the environment


class TestOneTenant(ContentConformance):
    """The CLI's ``--tenant`` view of a store keeps every promise of the content role, beside
    another tenant and the operator holding knowledge bases of the same names."""

    @pytest.fixture
    def store(self, tmp_path: Path) -> Iterator[Store]:
        shared = open_store(str(tmp_path / "kb.db"))
        other = shared.tenants.create_tenant("other")
        for tenant in (other.id, 0):
            shared.create_kb("alpha", config(), tenant)
        yield OneTenant(shared, shared.tenants.create_tenant("mine")).as_store()
        assert [k.name for k in shared.list_kbs(other.id)] == ["alpha"]  # untouched by it
        shared.close()
