"""``/demo``, the widget demo page: off unless ``CITEWISE_DEMO_KEY`` is set; on, it embeds the
widget with that key, and holds no other key: a tenant key, a revoked or an unknown one set
there is never put in a page. In a browser: ``test_browser_demo.py``."""

from __future__ import annotations

import re
from html.parser import HTMLParser
from pathlib import Path

import pytest
import uvicorn
from fastapi.testclient import TestClient
from pydantic import SecretStr
from typer.testing import CliRunner

from citewise.api.settings import Settings, get_settings
from citewise.cli import app as cli_app
from tests.api_fixtures import ADMIN, ADMIN_KEY, make_app, settings_for, tenant

HERE = "http://testserver"  # the origin TestClient's requests are made to
KEYS = re.compile(r"cw_[A-Za-z0-9_-]+")


class Loads(HTMLParser):
    """The URLs a page's tags load (``src``, ``href``), not those in its text."""

    def __init__(self, page: str) -> None:
        super().__init__()
        self.urls: list[str] = []
        self.feed(page)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.urls += [v or "" for k, v in attrs if k in ("src", "href")]


def demo_app(tmp_path: Path) -> tuple[TestClient, Settings]:
    settings = settings_for(tmp_path / "demo.db")
    return TestClient(make_app(settings)), settings


def test_the_demo_page_is_off_unless_a_key_is_set(tmp_path: Path) -> None:
    client, _ = demo_app(tmp_path)
    with client:
        r = client.get("/demo")
        assert r.status_code == 404 and r.json() == client.get("/no-such-page").json()
        assert "/demo" not in client.get("/openapi.json").json()["paths"]


def test_the_demo_page_embeds_the_widget_with_its_key_and_no_other(tmp_path: Path) -> None:
    client, settings = demo_app(tmp_path)
    with client:
        owner = tenant(client, "shop")
        widget = tenant(client, "shop", kind="widget", kb="docs", origins=[HERE])
        other = tenant(client, "shop", kind="widget", kb="docs", origins=[HERE])
        settings.demo_key = SecretStr(widget.key)
        r = client.get("/demo")
        assert r.status_code == 200 and r.headers["content-type"].startswith("text/html")
        page = r.text
        assert KEYS.findall(page) == [widget.key]  # once, in the widget's tag
        assert owner.key not in page and other.key not in page and ADMIN_KEY not in page
        assert f'<script src="/widget.js" data-kb="docs" data-key="{widget.key}"' in page
        # nothing is loaded from anywhere but this service, and nothing but the widget's script
        assert Loads(page).urls == ["data:,", "/widget.js"]
        policy = r.headers["content-security-policy"]
        assert "default-src 'none'" in policy and "script-src 'self';" in policy
        assert "connect-src 'self'" in policy and "frame-ancestors 'none'" in policy
        assert r.headers["cache-control"] == "no-store"
        assert 'role="alert"' not in page  # the key lists this origin


@pytest.mark.parametrize("which", ["tenant", "revoked", "unknown"])
def test_the_demo_page_never_shows_a_key_that_is_not_an_active_widget_key(
        tmp_path: Path, which: str) -> None:
    client, settings = demo_app(tmp_path)
    with client:
        owner = tenant(client, "shop")
        widget = tenant(client, "shop", kind="widget", kb="docs", origins=[HERE])
        token = {"tenant": owner.key, "revoked": widget.key, "unknown": "cw_" + "x" * 43}[which]
        if which == "revoked":
            assert client.get("/demo").status_code == 404  # not on yet
            settings.demo_key = SecretStr(token)
            assert client.get("/demo").status_code == 200
            [key] = [k for k in client.get("/v1/admin/tenants/shop/keys", headers=ADMIN).json()
                     if k["kind"] == "widget"]
            assert client.delete(f"/v1/admin/tenants/shop/keys/{key['id']}",
                                 headers=ADMIN).status_code == 204
        settings.demo_key = SecretStr(token)
        r = client.get("/demo")
        assert r.status_code == 503 and "CITEWISE_DEMO_KEY is not an active widget key" in r.text
        assert not KEYS.findall(r.text) and ADMIN_KEY not in r.text


def test_the_demo_page_says_when_its_key_does_not_list_its_origin(tmp_path: Path) -> None:
    client, settings = demo_app(tmp_path)
    with client:
        tenant(client, "shop")
        widget = tenant(client, "shop", kind="widget", kb="docs", origins=["https://shop.example"])
        settings.demo_key = SecretStr(widget.key)
        page = client.get("/demo").text
        assert 'role="alert"' in page and f"--origin {HERE}" in page


def test_an_empty_demo_key_is_none(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("CITEWISE_DEMO_KEY", " ")
    assert Settings(db=str(tmp_path / "x.db")).demo_key is None
    monkeypatch.setenv("CITEWISE_DEMO_KEY", "cw_abc")
    key = Settings(db=str(tmp_path / "x.db")).demo_key
    assert key is not None and key.get_secret_value() == "cw_abc" and "cw_abc" not in repr(key)


@pytest.mark.parametrize("key", ["", "cw_demo-widget-key"])
def test_serve_says_where_the_demo_page_is_when_it_is_on(
        key: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    monkeypatch.setenv("CITEWISE_ADMIN_KEY", ADMIN_KEY)
    monkeypatch.setenv("CITEWISE_DEMO_KEY", key)
    for variable in ("CITEWISE_DB", "CITEWISE_WORKERS"):  # serve sets them
        monkeypatch.setenv(variable, "")
    monkeypatch.setattr(uvicorn, "run", lambda *args, **kw: None)
    get_settings.cache_clear()
    try:
        r = CliRunner().invoke(cli_app, ["serve", "--port", "8123"])
    finally:
        get_settings.cache_clear()
    assert r.exit_code == 0, r.output
    assert ("the widget's demo at /demo" in r.output) == bool(key), r.output
    assert not key or key not in r.output
