"""Tenants, keys, ownership and the rate limiter, below the HTTP layer; the tenant commands."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from citewise.cli import app
from citewise.errors import ConfigError, QueryLogError, RateLimitError, TenantError
from citewise.ratelimit import RateLimiter, StoreWindows
from citewise.stores.sqlite import SQLiteStore
from citewise.tenancy import check_origin, hash_token, open_tenants, store_name
from tests.helpers import hashing_config


def test_keys_are_random_hashed_and_revocable(store: SQLiteStore) -> None:
    tenants = open_tenants(store)
    acme = tenants.create_tenant("acme")
    with pytest.raises(TenantError, match="already exists"):
        tenants.create_tenant("acme")
    key, token = tenants.create_key(acme, "tenant", None, (), 60, "ci")
    other, token2 = tenants.create_key(acme, "widget", "docs", ("https://a.example",), 10)
    assert token != token2 and token.startswith("cw_") and len(token) > 40
    assert tenants.key_for_token(token) == key and tenants.key_for_token(token2) == other
    assert tenants.key_for_token(token + "x") is None
    stored = store.db.execute("SELECT key_hash FROM api_keys ORDER BY id").fetchall()
    assert stored == [(hash_token(token),), (hash_token(token2),)]
    assert tenants.revoke_key(acme, key.id) and not tenants.revoke_key(acme, key.id)
    assert tenants.key_for_token(token) is None
    assert [k.revoked_at is not None for k in tenants.list_keys(acme)] == [True, False]


def test_deleting_a_kb_removes_its_ownership_and_feedback(store: SQLiteStore) -> None:
    tenants = open_tenants(store)
    acme = tenants.create_tenant("acme")
    kb = store.create_kb(store_name(acme.id, "docs"), hashing_config())
    tenants.own_kb(acme.id, "docs", kb.id)
    qid = store.log_query(kb, {"question": "q", "status": "answered"}, [0.0] * 256)
    store.add_feedback(kb, qid, True, "")
    with pytest.raises(QueryLogError):
        store.add_feedback(kb, qid + 1, True, "")
    store.delete_kb(kb.name)
    assert tenants.owned_kb(acme.id, "docs") is None
    assert store.db.execute("SELECT count(*) FROM query_log WHERE feedback IS NOT NULL").fetchone() == (0,)
    again = store.create_kb(store_name(acme.id, "docs"), hashing_config())
    tenants.own_kb(acme.id, "docs", again.id)
    assert tenants.owned_kbs(acme.id) == [("docs", again.id)]


def test_rate_limiter_is_a_token_bucket_per_key(store: SQLiteStore) -> None:
    now = [1_000.0]
    limiter = RateLimiter(StoreWindows(lambda: store), clock=lambda: now[0])
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
    store = SQLiteStore(db)
    assert open_tenants(store).key_for_token(made["key"]).id == made["id"]
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
