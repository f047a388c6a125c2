"""The chat widget in headless Chromium: a page on one origin embeds the widget from the live
API on another, asks a covered and an out-of-scope question, opens a citation, and shows a
document's ``<script>`` as text; it keeps the conversation for a follow-up, and a refusal's
topics are buttons that ask about them. Screenshots go to ``test-artifacts/``."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from citewise.api.settings import Settings
from citewise.kb import GateSetting
from citewise.stores.sqlite import open_sqlite
from tests.api_fixtures import COVERED, OUT_OF_SCOPE, kb_with_sample, make_app, settings_for, tenant, upload
from tests.live import chromium, free_port, need_chromium, screenshot, serve

pytestmark = pytest.mark.browser

HOSTILE = (b"# Injection notes\n\n## Payload handling\n\n"
           b"The glossary marker reads <script>window.__pwned = 1</script> and also "
           b"<img src=x onerror=\"window.__pwned = 2\"> as plain glossary text.\n")


class Quiet(SimpleHTTPRequestHandler):
    def log_message(self, *args: object) -> None:
        pass


def page_server(folder: Path):
    port = free_port()
    httpd = ThreadingHTTPServer(("127.0.0.1", port), partial(Quiet, directory=str(folder)))
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    return httpd, f"http://127.0.0.1:{port}"


@contextmanager
def shop(db: Path) -> Iterator[tuple[str, TestClient, Any, Path, str, Settings]]:
    """A live API on ``db`` with the tenant "shop" and its ``docs`` (the sample), and a folder
    served on its own origin for the page that embeds the widget: yields the API's URL, a
    client for set-up, the tenant, the folder, its origin and the settings."""
    site = db.parent / "site"
    site.mkdir()
    httpd, page_origin = page_server(site)
    settings = settings_for(db)
    app = make_app(settings)
    try:
        with serve(app) as api, TestClient(app) as setup:
            owner = tenant(setup, "shop")
            kb_with_sample(setup, owner)
            yield api, setup, owner, site, page_origin, settings
    finally:
        httpd.shutdown()
        httpd.server_close()


def ask(driver, question: str, count: int):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import WebDriverWait

    box = driver.find_element(By.CSS_SELECTOR, ".cw-input")
    box.send_keys(question)
    driver.find_element(By.CSS_SELECTOR, ".cw-send").click()
    wait = WebDriverWait(driver, 20)
    replies = ".cw-answer[data-status], .cw-refusal, .cw-error"
    wait.until(lambda d: len(d.find_elements(By.CSS_SELECTOR, replies)) >= count)
    wait.until(ec.element_to_be_clickable((By.CSS_SELECTOR, ".cw-send")))
    return driver.find_elements(By.CSS_SELECTOR, replies)[-1]


def open_chat(driver, api: str, site: Path, page_origin: str, key: str, body: str = "",
              title: str = "") -> None:
    """Serve a customer's page holding ``body`` and the widget's script tag for ``key`` (on
    knowledge base ``docs``), open it and click the chat bubble."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    titled = f' data-title="{title}"' if title else ""
    (site / "index.html").write_text(
        f"<!doctype html><html><head><title>Shop</title></head><body>{body}"
        f'<script src="{api}/widget.js" data-kb="docs" data-key="{key}"{titled}></script>'
        "</body></html>")
    driver.get(f"{page_origin}/index.html")
    WebDriverWait(driver, 10).until(lambda d: d.find_elements(By.CSS_SELECTOR, ".cw-bubble"))
    driver.find_element(By.CSS_SELECTOR, ".cw-bubble").click()


def test_widget_answers_refuses_and_escapes_in_a_real_browser(tmp_path: Path) -> None:
    need_chromium()
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    with shop(tmp_path / "w.db") as (api, setup, owner, site, page_origin, settings):
        assert upload(setup, owner, "docs", {"injection.md": HOSTILE})["status"] == 200
        widget = tenant(setup, "shop", kind="widget", kb="docs", origins=[page_origin])
        with chromium() as driver:
            open_chat(driver, api, site, page_origin, widget.key,
                      "<h1>A customer's page</h1><p>Questions? Use the chat bubble.</p>",
                      title="Ask the quit-smoking guide")

            answer = ask(driver, COVERED, 1)
            assert answer.get_attribute("data-status") == "answered", answer.text
            assert "0.5 mg once daily" in answer.text
            sources = answer.find_elements(By.CSS_SELECTOR, ".cw-sources li")
            assert sources and "varenicline.md" in sources[0].text
            answer.find_element(By.CSS_SELECTOR, ".cw-cite").click()
            opened = WebDriverWait(driver, 10)
            opened.until(lambda d: answer.find_elements(By.CSS_SELECTOR, ".cw-passage"))
            passage = answer.find_element(By.CSS_SELECTOR, ".cw-passage").text
            assert "varenicline.md" in passage and "Dosing" in passage
            screenshot(driver, "widget-answer.png")

            refusal = ask(driver, OUT_OF_SCOPE, 2)
            assert refusal.get_attribute("data-status") == "refused", refusal.text
            assert "does not cover your question" in refusal.text
            assert refusal.find_elements(By.CSS_SELECTOR, ".cw-topic")
            screenshot(driver, "widget-refusal.png")

            hostile = ask(driver, "glossary marker reads script window pwned", 3)
            assert hostile.get_attribute("data-status") == "answered", hostile.text
            assert "<script>window.__pwned = 1</script>" in hostile.text
            assert driver.execute_script("return window.__pwned === undefined")
            assert not driver.find_elements(By.CSS_SELECTOR, ".cw-log img, .cw-log script")
            screenshot(driver, "widget-escaped.png")


def test_widget_keeps_the_conversation_and_asks_a_clicked_topic(tmp_path: Path) -> None:
    need_chromium()
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    with shop(tmp_path / "w.db") as (api, setup, owner, site, page_origin, settings):
        # with the hashing embedder, the pool cosine at 0.08 answers "What is varenicline?"
        # and "How is varenicline dosed?" and refuses "How is it dosed?" read alone
        store = open_sqlite(settings.db)
        kb = store.get_kb("docs", store.tenants.get_tenant("shop").id)
        gate = GateSetting("pool", 0.08, kb.config.embedder, kb.config.fingerprint(), "calibrated")
        store.update_kb(kb.name, replace(kb.config, gate=gate), store.tenants.get_tenant("shop").id)
        store.close()
        widget = tenant(setup, "shop", kind="widget", kb="docs", origins=[page_origin])
        with chromium() as driver:
            open_chat(driver, api, site, page_origin, widget.key)

            first = ask(driver, "What is varenicline?", 1)
            assert first.get_attribute("data-status") == "answered", first.text
            follow = ask(driver, "How is it dosed?", 2)
            assert follow.get_attribute("data-status") == "answered", follow.text
            sources = [li.text for li in follow.find_elements(By.CSS_SELECTOR, ".cw-sources li")]
            assert sources and all("varenicline.md" in s for s in sources), sources
            screenshot(driver, "widget-follow-up.png")

            refusal = ask(driver, OUT_OF_SCOPE, 3)
            assert refusal.get_attribute("data-status") == "refused", refusal.text
            assert "does not cover your question" in refusal.text
            assert "threshold" not in refusal.text and "cosine" not in refusal.text
            topics = refusal.find_elements(By.CSS_SELECTOR, ".cw-topic")
            assert topics and all(refusal.text.count(t.text) == 1 for t in topics), refusal.text
            topic = topics[0]
            label = topic.text
            topic.click()
            wait = WebDriverWait(driver, 20)
            replies = ".cw-answer[data-status], .cw-refusal, .cw-error"
            wait.until(lambda d: len(d.find_elements(By.CSS_SELECTOR, replies)) >= 4)
            asked = driver.find_elements(By.CSS_SELECTOR, ".cw-user")[-1].text
            assert asked == label.replace(" \u203a ", ": "), (asked, label)
            reply = driver.find_elements(By.CSS_SELECTOR, replies)[-1]
            assert reply.get_attribute("data-status") == "answered", reply.text
            screenshot(driver, "widget-topic-clicked.png")

            driver.find_element(By.CSS_SELECTOR, ".cw-reset").click()
            assert not driver.find_elements(By.CSS_SELECTOR, ".cw-log .cw-msg")
            alone = ask(driver, "How is it dosed?", 1)  # a new conversation: nothing to refer to
            assert alone.get_attribute("data-status") == "refused", alone.text


def test_widget_shows_the_services_error_message(tmp_path: Path) -> None:
    """An error answer's ``{"detail": ...}`` is what the reader sees (here a key over its
    rate), not "The request failed (429).\""""
    need_chromium()

    with shop(tmp_path / "e.db") as (api, setup, owner, site, page_origin, settings):
        widget = tenant(setup, "shop", kind="widget", kb="docs", origins=[page_origin],
                        rate_per_minute=1)
        with chromium() as driver:
            open_chat(driver, api, site, page_origin, widget.key)
            assert ask(driver, COVERED, 1).get_attribute("data-status") == "answered"
            error = ask(driver, COVERED, 2)
            assert "cw-error" in error.get_attribute("class")
            assert error.text.startswith("Too many requests for this key; retry after")
            assert "Try again in" in error.text and "request failed" not in error.text
            screenshot(driver, "widget-error.png")
