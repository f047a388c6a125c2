"""Tenants, keys and ownership on the MySQL/MariaDB and PostgreSQL stores, and the HTTP
service's tenant-wall tests run again with its store on each server."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from citewise.errors import QueryLogError, TenantError
from citewise.server import Settings
from citewise.stores.server import ServerStore
from citewise.tenancy import hash_token, open_tenants, store_name
from tests.api_fixtures import ADMIN_KEY, make_app
from tests.store_conformance import config, sql
from tests.test_api_isolation import (  # noqa: F401  collected again here, on the server stores
    test_a_widget_key_asks_one_kb_from_its_origins_only,
    test_another_tenants_kb_looks_exactly_like_a_missing_one,
    test_chunk_ids_and_query_ids_of_another_tenant_are_not_found,
    test_same_kb_name_in_two_tenants_never_mixes,
)

SERVERS = ["mysql", "pg"]
pytestmark = pytest.mark.server


@pytest.fixture(params=SERVERS)
def server_store(request: pytest.FixtureRequest) -> ServerStore:
    return request.getfixturevalue(f"{request.param}_store")


@pytest.fixture(params=SERVERS)
def client(request: pytest.FixtureRequest) -> Iterator[TestClient]:
    with request.getfixturevalue(f"{request.param}_database")() as url:
        settings = Settings(db=url, admin_key=ADMIN_KEY, embedder="hashing:256")
        with TestClient(make_app(settings)) as c:
            yield c


def test_keys_are_hashed_scoped_and_revocable(server_store: ServerStore) -> None:
    tenants = open_tenants(server_store)
    acme = tenants.create_tenant("acme")
    with pytest.raises(TenantError, match="already exists"):
        tenants.create_tenant("acme")
    with pytest.raises(TenantError, match="No tenant named 'nobody'"):
        tenants.get_tenant("nobody")
    key, token = tenants.create_key(acme, "tenant", None, (), 60, "ci")
    widget, token2 = tenants.create_key(acme, "widget", "docs", ("https://a.example",), 10)
    assert widget.origins == ("https://a.example",) and widget.kb == "docs"
    assert tenants.key_for_token(token) == key and tenants.key_for_token(token2) == widget
    assert tenants.key_for_token(token + "x") is None
    stored = sql(server_store, "SELECT key_hash FROM api_keys ORDER BY id")
    assert [r[0] for r in stored] == [hash_token(token), hash_token(token2)]
    other = tenants.create_tenant("other")
    assert not tenants.revoke_key(other, key.id)  # not theirs to revoke
    assert tenants.revoke_key(acme, key.id) and not tenants.revoke_key(acme, key.id)
    assert tenants.key_for_token(token) is None
    assert [k.revoked_at is not None for k in tenants.list_keys(acme)] == [True, False]
    assert tenants.list_keys(other) == []
    assert [t.name for t in tenants.list_tenants()] == ["acme", "other"]


def test_deleting_a_kb_removes_its_ownership_and_log(server_store: ServerStore) -> None:
    tenants = open_tenants(server_store)
    acme = tenants.create_tenant("acme")
    kb = server_store.create_kb(store_name(acme.id, "docs"), config())
    tenants.own_kb(acme.id, "docs", kb.id)
    assert tenants.owned_kb(acme.id, "docs") == kb.id and tenants.owned_kb(acme.id + 1, "docs") is None
    qid = server_store.log_query(kb, {"question": "q", "status": "answered"}, None)
    server_store.add_feedback(kb, qid, True)
    with pytest.raises(QueryLogError):
        server_store.add_feedback(kb, qid + 1, True)
    server_store.delete_kb(kb.name)
    assert tenants.owned_kb(acme.id, "docs") is None
    assert sql(server_store, "SELECT count(*) FROM query_log")[0][0] == 0
    again = server_store.create_kb(store_name(acme.id, "docs"), config())
    tenants.own_kb(acme.id, "docs", again.id)
    assert tenants.owned_kbs(acme.id) == [("docs", again.id)]


@pytest.mark.parametrize("server", SERVERS)
def test_a_database_from_before_m003_upgrades_and_keeps_its_log(
    server: str, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    from citewise.stores import migrations, open_store

    with request.getfixturevalue(f"{server}_database")() as url:
        with monkeypatch.context() as m:
            m.setitem(migrations.MIGRATIONS, "mysql", migrations.MIGRATIONS["mysql"][:2])
            m.setitem(migrations.MIGRATIONS, "postgres", migrations.MIGRATIONS["postgres"][:2])
            old = open_store(url)
            kb = old.create_kb("kb", config())
            with old.transaction() as cur:  # a row as the m002 code wrote it
                cur.execute(
                    "INSERT INTO query_log (kb_id, created_at, question, status, embedder, record) "
                    "VALUES (%s, %s, %s, %s, %s, %s)",
                    (kb.id, "2026-01-01T00:00:00+00:00", "before", "answered", "hashing:8",
                     '{"question": "before"}'),
                )
            old.close()
        store = open_store(url)
        try:
            assert store.migrations_applied()[2:4] == ["m003_tenants", "m004_query_log_v2"]
            [row] = store.query_log(kb)
            assert (row.question, row.path, row.feedback) == ("before", "", None)
            store.add_feedback(kb, row.id, True)
            assert store.query_log(kb)[0].feedback is True
        finally:
            store.close()
