"""Tenants are walls: no response or error shows one tenant's objects to another, and a widget
key reaches one knowledge base from its origins only."""

from __future__ import annotations

import json
from typing import Any

import pytest
from fastapi.testclient import TestClient

from tests.api_fixtures import ADMIN, tenant, upload

SECRET = b"# Formula\n\n## Recipe\n\nThe zebra formula uses 42 grams of saffron and violet dust.\n"
PAGE = "http://shop.example.com"


def two_tenants(client: TestClient):
    a, b = tenant(client, "alpha"), tenant(client, "beta")
    for who in (a, b):
        assert client.post("/v1/kbs", json={"name": "docs"}, headers=who.headers).status_code == 201
    assert client.post("/v1/kbs", json={"name": "private"}, headers=a.headers).status_code == 201
    upload(client, a, "docs", {"secret.md": SECRET})
    upload(client, a, "private", {"secret.md": SECRET})
    upload(client, b, "docs", {"notes.md": b"# Notes\n\n## Shipping\n\nBeta ships parcels on Mondays.\n"})
    return a, b


def test_same_kb_name_in_two_tenants_never_mixes(client: TestClient) -> None:
    a, b = two_tenants(client)
    question = {"question": "What does the zebra formula use? saffron violet dust"}
    for mode in ("dense", "bm25", "hybrid"):
        r = client.post("/v1/kbs/docs/search", json={"query": "zebra formula saffron", "mode": mode},
                        headers=b.headers)
        chunks = json.dumps(r.json()["chunks"])
        assert "zebra" not in chunks and "secret.md" not in chunks
    r = client.post("/v1/kbs/docs/ask", json=question, headers=b.headers)
    body = r.json()
    for echo in ("question", "standalone_question", "uncovered"):  # the question's own words
        body.pop(echo)
    body["gate"].pop("parts")
    assert "zebra" not in json.dumps(body) and "secret" not in json.dumps(body)
    r = client.post("/v1/kbs/docs/ask", json=question, headers=a.headers)
    assert r.json()["status"] == "answered" and "saffron" in r.json()["answer"]
    assert [k["name"] for k in client.get("/v1/kbs", headers=b.headers).json()] == ["docs"]
    docs = client.get("/v1/kbs/docs/documents", headers=b.headers).json()
    assert [d["doc_id"] for d in docs] == ["notes.md"]


def test_another_tenants_kb_looks_exactly_like_a_missing_one(client: TestClient) -> None:
    a, b = two_tenants(client)
    for method, path, body in [
        ("GET", "/v1/kbs/{kb}", None),
        ("GET", "/v1/kbs/{kb}/documents", None),
        ("DELETE", "/v1/kbs/{kb}", None),
        ("DELETE", "/v1/kbs/{kb}/documents/secret.md", None),
        ("POST", "/v1/kbs/{kb}/ask", {"question": "zebra formula"}),
        ("POST", "/v1/kbs/{kb}/search", {"query": "zebra formula"}),
        ("POST", "/v1/kbs/{kb}/feedback", {"feedback_token": "x" * 32, "helpful": True}),
    ]:
        theirs = client.request(method, path.format(kb="private"), json=body, headers=b.headers)
        nowhere = client.request(method, path.format(kb="nowhere"), json=body, headers=b.headers)
        assert theirs.status_code == nowhere.status_code == 404, (path, theirs.text)
        assert theirs.json()["detail"] == nowhere.json()["detail"].replace("nowhere", "private")
        assert "t1." not in theirs.text and "alpha" not in theirs.text
    assert client.get("/v1/kbs/private", headers=a.headers).status_code == 200


def test_chunk_ids_and_query_ids_of_another_tenant_are_not_found(client: TestClient) -> None:
    a, b = two_tenants(client)
    answer = client.post("/v1/kbs/docs/ask", json={"question": "zebra formula saffron violet dust"},
                         headers=a.headers).json()
    chunk_id, token = answer["citations"][0]["chunk_id"], answer["feedback_token"]
    assert client.get(f"/v1/kbs/docs/passages/{chunk_id}", headers=a.headers).status_code == 200
    r = client.get(f"/v1/kbs/docs/passages/{chunk_id}", headers=b.headers)
    assert r.status_code == 404 and "zebra" not in r.text
    r = client.post("/v1/kbs/docs/feedback", json={"feedback_token": token, "helpful": False},
                    headers=b.headers)
    assert r.status_code == 404


@pytest.mark.heavy
def test_a_widget_key_asks_one_kb_from_its_origins_only(client: TestClient) -> None:
    a, _ = two_tenants(client)
    w = tenant(client, "alpha", kind="widget", kb="docs", origins=[PAGE])
    page = {**w.headers, "Origin": PAGE}
    r = client.post("/v1/kbs/docs/ask", json={"question": "zebra formula saffron violet dust"},
                    headers=page)
    assert r.status_code == 200 and r.headers["access-control-allow-origin"] == PAGE
    chunk = r.json()["citations"][0]["chunk_id"]
    assert client.get(f"/v1/kbs/docs/passages/{chunk}", headers=page).status_code == 200
    r = client.post("/v1/kbs/docs/ask", json={"question": "zebra"},
                    headers={**w.headers, "Origin": "http://evil.example.com"})
    assert r.status_code == 403 and "access-control-allow-origin" not in r.headers
    r = client.post("/v1/kbs/docs/ask", json={"question": "zebra"}, headers=w.headers)
    assert r.status_code == 403 and "origin (none)" in r.json()["detail"]
    assert client.post("/v1/kbs/private/ask", json={"question": "zebra"}, headers=page).status_code == 404
    for method, path in [("GET", "/v1/kbs"), ("GET", "/v1/kbs/docs/documents"), ("DELETE", "/v1/kbs/docs")]:
        assert client.request(method, path, headers=page).status_code == 403
    r = client.post("/v1/kbs/docs/search", json={"query": "zebra"}, headers=page)
    assert r.status_code == 403 and "widget key" in r.json()["detail"]


def test_a_same_origin_get_counts_as_from_the_services_origin(client: TestClient) -> None:
    """A browser sends no Origin with a GET to its page's own origin, but ``Sec-Fetch-Site:
    same-origin`` (the widget on ``/demo`` opening a passage): the key is checked against the
    service's origin then. Without that header no origin is assumed."""
    owner = tenant(client, "alpha")
    assert client.post("/v1/kbs", json={"name": "docs"}, headers=owner.headers).status_code == 201
    here = tenant(client, "alpha", kind="widget", kb="docs", origins=["http://testserver"])
    elsewhere = tenant(client, "alpha", kind="widget", kb="docs", origins=[PAGE])
    path = "/v1/kbs/docs/passages/nosuchchunk"  # 404 once the key is accepted, else 403
    same = {"Sec-Fetch-Site": "same-origin"}
    assert client.get(path, headers={**here.headers, **same}).status_code == 404
    assert client.get(path, headers={**elsewhere.headers, **same}).status_code == 403
    for fetched in ({}, {"Sec-Fetch-Site": "cross-site"}, {"Sec-Fetch-Site": "none"}):
        r = client.get(path, headers={**here.headers, **fetched})
        assert r.status_code == 403 and "origin (none)" in r.json()["detail"]
    r = client.get(path, headers={**here.headers, **same, "Origin": "https://evil.example"})
    assert r.status_code == 403  # an Origin sent is the one checked


def preflight(client: TestClient, origin: str) -> Any:
    return client.options("/v1/kbs/docs/ask", headers={
        "Origin": origin, "Access-Control-Request-Method": "POST",
        "Access-Control-Request-Headers": "authorization"})


def test_cors_preflight_and_tenant_keys_get_no_cors(client: TestClient) -> None:
    a, _ = two_tenants(client)
    tenant(client, "alpha", kind="widget", kb="docs", origins=[PAGE])
    r = preflight(client, PAGE)
    assert r.status_code == 204 and r.headers["access-control-allow-origin"] == PAGE
    assert "authorization" in r.headers["access-control-allow-headers"]
    r = client.get("/v1/kbs", headers={**a.headers, "Origin": PAGE})
    assert r.status_code == 200 and "access-control-allow-origin" not in r.headers


def test_a_cors_preflight_is_answered_for_widget_origins_only(client: TestClient) -> None:
    """Issue 28: the preflight echoed any origin. It carries no key, so the origins it allows
    are those of the service's active widget keys; a key made or revoked here counts at once."""
    two_tenants(client)
    for origin in (PAGE, "https://evil.example", "null"):
        r = preflight(client, origin)
        assert r.status_code == 403 and "access-control-allow-origin" not in r.headers, r.headers
        assert "access-control-allow-methods" not in r.headers and r.json()["detail"]
    w = tenant(client, "alpha", kind="widget", kb="docs", origins=[PAGE])
    r = preflight(client, PAGE)
    assert r.status_code == 204 and r.headers["access-control-allow-origin"] == PAGE
    assert preflight(client, "https://evil.example").status_code == 403
    key_id = next(k["id"] for k in client.get("/v1/admin/tenants/alpha/keys", headers=ADMIN).json()
                  if k["kind"] == "widget")
    assert client.delete(f"/v1/admin/tenants/alpha/keys/{key_id}", headers=ADMIN).status_code == 204
    r = preflight(client, PAGE)
    assert r.status_code == 403 and "access-control-allow-origin" not in r.headers
    assert w.key  # revoked: its page may no longer call


def test_widget_keys_need_a_kb_and_origins(client: TestClient) -> None:
    tenant(client, "alpha")
    for body in ({"kind": "widget", "kb": "docs"}, {"kind": "widget", "origins": [PAGE]},
                 {"kind": "widget", "kb": "docs", "origins": ["shop.example.com"]},
                 {"kind": "tenant", "kb": "docs"}):
        r = client.post("/v1/admin/tenants/alpha/keys", json=body, headers=ADMIN)
        assert r.status_code == 422 and r.json()["detail"], body
    assert client.post("/v1/admin/tenants/nobody/keys", json={}, headers=ADMIN).status_code == 404
