"""The chat widget in headless Chromium: a page on one origin embeds the widget from the live
API on another, asks a covered and an out-of-scope question, opens a citation, and shows a
document's ``<script>`` as text; its sources are named by their documents' titles, a long
answer is shown from its start, it keeps the conversation for a follow-up, and a refusal lists
its topics, each a button that asks about it. Screenshots go to ``test-artifacts/``."""

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

# one passage whose answer is a list of ten items: taller than the chat panel
LONG = ("# Zorblat Care Guide\n\n## Warning signs\n\nA failing zorblat shows these warning signs:\n\n"
        + "".join(f"- The zorblat {sign}.\n" for sign in (
            "hums at night for hours without stopping", "leaves a blue stain on the shelf below it",
            "stops glowing when the room is warm", "smells of burnt sugar after each use",
            "rattles when it is carried from room to room", "needs twice its usual water each week",
            "turns grey along its lower rim", "slows to half its speed in the morning",
            "sheds small flakes onto the table", "refuses to start after a short rest"))).encode()
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


def set_gate(settings: Settings, policy: str, threshold: float) -> None:
    """The gate of the shop's ``docs`` as if calibrated at ``threshold``."""
    store = open_sqlite(settings.db)
    owner = store.tenants.get_tenant("shop").id
    kb = store.get_kb("docs", owner)
    gate = GateSetting(policy, threshold, kb.config.embedder, kb.config.fingerprint(), "calibrated")
    store.update_kb(kb.name, replace(kb.config, gate=gate), owner)
    store.close()


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
            # each source by its document's title (and section), never by its file name
            sources = [li.text for li in answer.find_elements(By.CSS_SELECTOR, ".cw-sources li")]
            assert sources[:2] == [
                "[1] Varenicline \u203a Dosing schedule",
                "[2] Bupropion for Stopping Smoking \u203a Dosing \u203a Standard schedule"], sources
            cite = answer.find_element(By.CSS_SELECTOR, ".cw-cite")
            assert cite.get_attribute("title") == "Varenicline \u203a Dosing schedule"
            cite.click()
            opened = WebDriverWait(driver, 10)
            opened.until(lambda d: answer.find_elements(By.CSS_SELECTOR, ".cw-passage"))
            passage = answer.find_element(By.CSS_SELECTOR, ".cw-passage").text
            assert passage.startswith("Varenicline \u203a Dosing schedule"), passage
            assert ".md" not in answer.text, answer.text
            screenshot(driver, "widget-answer.png")

            refusal = ask(driver, OUT_OF_SCOPE, 2)
            assert refusal.get_attribute("data-status") == "refused", refusal.text
            assert "does not cover your question" in refusal.text
            # the closest topics are a list a screen reader announces as one, each a button
            lists = refusal.find_elements(By.CSS_SELECTOR, "ul.cw-related")
            assert len(lists) == 1 and lists[0].aria_role == "list", refusal.text
            assert lists[0].get_attribute("aria-label") == "Related topics"
            items = lists[0].find_elements(By.CSS_SELECTOR, ":scope > li")
            buttons = [li.find_element(By.CSS_SELECTOR, "button.cw-topic") for li in items]
            assert len(items) >= 2 and all(li.aria_role == "listitem" for li in items)
            assert all(b.aria_role == "button" and b.accessible_name == b.text for b in buttons)
            assert len(refusal.find_elements(By.CSS_SELECTOR, ".cw-topic")) == len(buttons)
            # the reason reads around the list: "...it does cover are:", the list, "You can ask..."
            said = [p.text for p in refusal.find_elements(By.CSS_SELECTOR, ":scope > .cw-text")]
            assert said[0].endswith("are:") and said[-1].startswith("You can ask"), said
            assert all(refusal.text.count(b.text) == 1 for b in buttons), refusal.text
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
        set_gate(settings, "pool", 0.08)
        widget = tenant(setup, "shop", kind="widget", kb="docs", origins=[page_origin])
        with chromium() as driver:
            open_chat(driver, api, site, page_origin, widget.key)

            first = ask(driver, "What is varenicline?", 1)
            assert first.get_attribute("data-status") == "answered", first.text
            follow = ask(driver, "How is it dosed?", 2)
            assert follow.get_attribute("data-status") == "answered", follow.text
            sources = [li.text for li in follow.find_elements(By.CSS_SELECTOR, ".cw-sources li")]
            assert sources and all(s.split(" ", 1)[1].startswith("Varenicline") for s in sources), sources
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


def test_widget_shows_a_long_answer_from_its_start(tmp_path: Path) -> None:
    """An answer taller than the chat panel arrives with the log at the question, its first
    lines in view (it scrolled to the answer's end, past all of them)."""
    need_chromium()
    from selenium.webdriver.common.by import By

    with shop(tmp_path / "l.db") as (api, setup, owner, site, page_origin, settings):
        assert upload(setup, owner, "docs", {"zorblat-care.md": LONG})["status"] == 200
        set_gate(settings, "top1", 0.3)  # the hashing embedder's cosine for the list: 0.46
        widget = tenant(setup, "shop", kind="widget", kb="docs", origins=[page_origin])
        with chromium() as driver:
            open_chat(driver, api, site, page_origin, widget.key)
            assert ask(driver, COVERED, 1).get_attribute("data-status") == "answered"
            answer = ask(driver, "What are the warning signs of a failing zorblat?", 2)
            assert answer.get_attribute("data-status") == "answered", answer.text
            assert answer.text.count("The zorblat") == 10
            seen = driver.execute_script("""
                var log = document.querySelector('.cw-log'), asked = arguments[0];
                var view = log.getBoundingClientRect(), box = arguments[1].getBoundingClientRect();
                return {view: [view.top, view.bottom], answer: [box.top, box.bottom],
                        asked: asked.getBoundingClientRect().top, height: log.clientHeight,
                        end: log.scrollHeight - log.clientHeight - log.scrollTop};""",
                driver.find_elements(By.CSS_SELECTOR, ".cw-user")[-1], answer)
            top, bottom = seen["view"]
            assert seen["answer"][1] - seen["answer"][0] > seen["height"], seen  # a long answer
            assert top <= seen["asked"] < seen["answer"][0] < top + seen["height"] / 2, seen
            assert seen["end"] > 50, seen  # not scrolled to its end
            first = answer.find_element(By.CSS_SELECTOR, ".cw-text > div")
            assert first.text.startswith("A failing zorblat shows these warning signs")
            assert top <= first.rect["y"] < bottom - 40  # its first lines show
            screenshot(driver, "widget-long-answer.png")


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
