"""``POST /v1/kbs/{kb}/urls``: the service fetches only from the hosts and ports its operator
lists in ``CITEWISE_WEB_HOSTS`` (a host alone: ports 80 and 443), never from an address that is
not public unless the list names that host exactly, and reports one result per page."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from pydantic import ValidationError

from citewise.errors import ConfigError, FetchError
from citewise.web import Hosts
from tests.api_fixtures import make_app, settings_for, tenant
from tests.web_site import drip_server, web_site

pytestmark = pytest.mark.heavy  # servers, processes, deadlines or megabytes: make test, not make unit

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


def port_of(base: str) -> str:
    return base.rsplit(":", 1)[1]


def test_a_listed_host_is_fetched_and_reported_per_page(tmp_path: Path) -> None:
    with web_site() as site, client_for(tmp_path, [f"127.0.0.1:{port_of(site.base)}"]) as client:
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
    with web_site() as site, client_for(tmp_path, [f"*.example.org:{port_of(site.base)}"]) as client:
        site.page("/patch.html", PAGE)
        port = port_of(site.base)
        acme = tenant(client, "acme")
        client.post("/v1/kbs", json={"name": "docs"}, headers=acme.headers)
        r = client.post("/v1/kbs/docs/urls", json={"urls": [f"http://docs.example.org:{port}/patch.html"]},
                        headers=acme.headers)
        assert r.status_code == 422, r.text
        [page] = r.json()["pages"]
        assert page["status"] == "skipped" and "non-public address" in page["reason"]
        assert site.log == []


def test_a_host_entry_allows_ports_80_and_443_only_and_tells_nothing_of_others(
        tmp_path: Path) -> None:
    """``127.0.0.1`` on the list let a tenant fetch every port of it: a database or cache
    answered with its own error, and a page on another port was stored."""
    with web_site() as site, drip_server(b"", 0, head=b"J\x00\x00\x00\n11.4.2-MariaDB\x00") as db, \
            drip_server(b"", 0, head=b"-ERR unknown command 'GET'\r\n") as cache, \
            client_for(tmp_path, ["127.0.0.1"]) as client:
        site.page("/patch.html", PAGE)
        closed = drip_server(b"", 0)
        with closed as gone:
            pass  # its port is closed now
        acme = tenant(client, "acme")
        client.post("/v1/kbs", json={"name": "docs"}, headers=acme.headers)
        details = set()
        for port in (port_of(site.base), db.port, cache.port, gone.port):
            r = client.post("/v1/kbs/docs/urls", json={"urls": [f"http://127.0.0.1:{port}/patch.html"]},
                            headers=acme.headers)
            assert r.status_code == 403, r.text
            details.add(r.json()["detail"].replace(str(port), "PORT"))
        assert details == {"The address 127.0.0.1:PORT is not one this server fetches from; its "
                           "operator lists hosts and ports in CITEWISE_WEB_HOSTS."}
        assert site.log == [] and db.connections == cache.connections == 0
        assert client.get("/v1/kbs/docs/documents", headers=acme.headers).json() == []


def test_a_host_and_port_entry_allows_that_port_only(tmp_path: Path) -> None:
    with web_site() as site, web_site() as other, \
            client_for(tmp_path, [f"127.0.0.1:{port_of(site.base)}"]) as client:
        site.page("/patch.html", PAGE)
        other.page("/patch.html", PAGE)
        acme = tenant(client, "acme")
        client.post("/v1/kbs", json={"name": "docs"}, headers=acme.headers)
        r = client.post("/v1/kbs/docs/urls", json={"urls": [f"{site.base}/patch.html"]},
                        headers=acme.headers)
        assert r.status_code == 200 and r.json()["pages"][0]["status"] == "added", r.text
        for url in (f"{other.base}/patch.html", "http://127.0.0.1/patch.html"):
            r = client.post("/v1/kbs/docs/urls", json={"urls": [url]}, headers=acme.headers)
            assert r.status_code == 403, r.text
        assert other.log == []


def test_host_entries_read_as_host_and_ports() -> None:
    hosts = Hosts.listed(["Docs.Example.com", "127.0.0.1:8080", "[::1]:8443", "::2",
                          "*.example.org:8443", "[fe80::1]"])
    allowed = [("docs.example.com", 80), ("docs.example.com", 443), ("127.0.0.1", 8080),
               ("::1", 8443), ("::2", 443), ("a.example.org", 8443), ("fe80::1", 80)]
    refused = [("docs.example.com", 8080), ("127.0.0.1", 80), ("127.0.0.1", 443), ("::1", 443),
               ("::2", 8080), ("a.example.org", 443), ("example.org", 8443), ("fe80::1", 22)]
    assert all(hosts.permits(host, port) for host, port in allowed)
    assert not any(hosts.permits(host, port) for host, port in refused)
    assert Hosts.any().permits("anything.example", 6379)
    for bad in ("host:0", "host:http", "host:70000", "[::1", "a b"):
        with pytest.raises(ConfigError, match="CITEWISE_WEB_HOSTS"):
            Hosts.listed([bad])
    with pytest.raises(ValidationError, match="CITEWISE_WEB_HOSTS"):
        settings_for(Path("x.db"), web_hosts="127.0.0.1:99999")


def test_a_connection_to_a_port_not_listed_is_never_made() -> None:
    """The check again where sockets are made: a redirect or link is checked there too."""
    with drip_server(b"", 0, head=b"-ERR\r\n") as cache:
        hosts = Hosts.listed([f"127.0.0.1:{cache.port + 1}"])
        with pytest.raises(FetchError, match="not a host and port this server fetches from"):
            hosts.connect(("127.0.0.1", cache.port))
    assert cache.connections == 0
