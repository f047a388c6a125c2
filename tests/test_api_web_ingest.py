"""``POST /v1/kbs/{kb}/urls``: the service fetches only from the hosts its operator lists in
``CITEWISE_WEB_HOSTS``, never from an address that is not public unless the list names that
host exactly, and reports one result per page."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from tests.api_fixtures import make_app, settings_for, tenant
from tests.web_site import web_site

PAGE = ("<html><head><title>Patches</title></head><body><main><h2>Wearing a patch</h2><p>Put a "
        "new patch on clean, dry, hairless skin each morning and press it for ten seconds so "
        "that it sticks all day.</p></main></body></html>")


def client_for(tmp_path: Path, hosts: list[str]):
    return TestClient(make_app(settings_for(tmp_path / "w.db", web_hosts=hosts, web_delay_s=0)))


def test_urls_are_refused_unless_the_operator_lists_their_host(tmp_path: Path) -> None:
    with web_site() as site:
        site.page("/patch.html", PAGE)
        for hosts in ([], ["docs.example.com", "*.example.org"]):
            with client_for(tmp_path, hosts) as client:
                acme = tenant(client, "acme")
                client.post("/v1/kbs", json={"name": "docs"}, headers=acme.headers)
                r = client.post("/v1/kbs/docs/urls", json={"urls": [f"{site.base}/patch.html"]},
                                headers=acme.headers)
                assert r.status_code == 403, r.text
                assert "CITEWISE_WEB_HOSTS" in r.json()["detail"]
        assert site.log == []


def test_a_listed_host_is_fetched_and_reported_per_page(tmp_path: Path) -> None:
    with web_site() as site, client_for(tmp_path, ["127.0.0.1"]) as client:
        site.page("/patch.html", PAGE)
        acme = tenant(client, "acme")
        client.post("/v1/kbs", json={"name": "docs"}, headers=acme.headers)
        urls = [f"{site.base}/patch.html", f"{site.base}/missing.html"]
        r = client.post("/v1/kbs/docs/urls", json={"urls": urls}, headers=acme.headers)
        assert r.status_code == 200, r.text
        pages = {p["url"]: p for p in r.json()["pages"]}
        assert pages[urls[0]]["status"] == "added"
        assert pages[urls[1]] == {"url": urls[1], "status": "skipped", "reason": "HTTP 404 Not Found"}
        again = client.post("/v1/kbs/docs/urls", json={"urls": urls[:1]}, headers=acme.headers)
        assert again.json()["pages"] == [{"url": urls[0], "status": "unchanged", "reason": None}]
        docs = client.get("/v1/kbs/docs/documents", headers=acme.headers).json()
        assert [d["doc_id"] for d in docs] == [urls[0]]
        bad = client.post("/v1/kbs/docs/urls", json={"urls": ["file:///etc/passwd"]},
                          headers=acme.headers)
        assert bad.status_code == 422 and "http(s)" in bad.json()["detail"]


def test_a_wildcard_host_resolving_to_a_private_address_is_not_fetched(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real = socket.getaddrinfo

    def resolve(host: str, *args: object, **kw: object):
        return real("127.0.0.1" if host == "docs.example.org" else host, *args, **kw)

    monkeypatch.setattr(socket, "getaddrinfo", resolve)
    with web_site() as site, client_for(tmp_path, ["*.example.org"]) as client:
        site.page("/patch.html", PAGE)
        port = site.base.rsplit(":", 1)[1]
        acme = tenant(client, "acme")
        client.post("/v1/kbs", json={"name": "docs"}, headers=acme.headers)
        r = client.post("/v1/kbs/docs/urls", json={"urls": [f"http://docs.example.org:{port}/patch.html"]},
                        headers=acme.headers)
        assert r.status_code == 422, r.text
        [page] = r.json()["pages"]
        assert page["status"] == "skipped" and "non-public address" in page["reason"]
        assert site.log == []
