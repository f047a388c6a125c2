"""``/demo`` in headless Chromium with the network closed (no host resolves but 127.0.0.1): the
page the service serves with the widget on it for ``CITEWISE_DEMO_KEY``'s knowledge base
answers a question, opens a citation and its whole passage, asks nothing of any other host
(nor tries to) and leaves no error or warning in the console; its source holds the demo key
and no other. Screenshots go to ``test-artifacts/``."""

from __future__ import annotations

from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from pydantic import SecretStr

from tests.api_fixtures import ADMIN_KEY, COVERED, kb_with_sample, make_app, settings_for, tenant
from tests.live import OFFLINE, chromium, console, need_chromium, requested, screenshot, serve

pytestmark = pytest.mark.browser


def test_the_demo_page_answers_from_this_service_only(tmp_path: Path) -> None:
    need_chromium()
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    settings = settings_for(tmp_path / "demo.db")
    app = make_app(settings)
    with serve(app) as api, TestClient(app) as setup:
        owner = tenant(setup, "shop")
        kb_with_sample(setup, owner)
        # the README's key: a widget key for the knowledge base, listing the page's origin
        widget = tenant(setup, "shop", kind="widget", kb="docs", origins=[api])
        settings.demo_key = SecretStr(widget.key)
        with chromium(OFFLINE, log_requests=True) as driver:
            driver.get(f"{api}/demo")
            wait = WebDriverWait(driver, 20)
            wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, ".cw-bubble"))
            source = driver.page_source
            assert widget.key in source and owner.key not in source and ADMIN_KEY not in source
            assert "knowledge base docs" in driver.find_element(By.TAG_NAME, "main").text
            driver.find_element(By.CSS_SELECTOR, ".cw-bubble").click()
            driver.find_element(By.CSS_SELECTOR, ".cw-input").send_keys(COVERED)
            driver.find_element(By.CSS_SELECTOR, ".cw-send").click()
            replies = ".cw-answer[data-status], .cw-refusal, .cw-error"
            wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, replies))
            answer = driver.find_element(By.CSS_SELECTOR, replies)
            assert answer.get_attribute("data-status") == "answered", answer.text
            assert "0.5 mg once daily" in answer.text
            answer.find_element(By.CSS_SELECTOR, ".cw-cite").click()
            wait.until(lambda d: answer.find_elements(By.CSS_SELECTOR, ".cw-more"))
            answer.find_element(By.CSS_SELECTOR, ".cw-more").click()  # a GET of the passage
            wait.until(lambda d: not answer.find_elements(By.CSS_SELECTOR, ".cw-more")
                       or answer.find_elements(By.CSS_SELECTOR, ".cw-error"))
            passage = answer.find_element(By.CSS_SELECTOR, ".cw-passage").text
            assert not answer.find_elements(By.CSS_SELECTOR, ".cw-error"), passage
            assert "Days 4 to 7: 0.5 mg twice daily" in passage  # the whole passage, not the quote
            screenshot(driver, "demo-page.png")
            asked = requested(driver, attempted=True)
            logged = console(driver)
    assert {f"{api}/demo", f"{api}/widget.js", f"{api}/v1/kbs/docs/ask"} <= set(asked), asked
    elsewhere = [url for url in asked if not url.startswith(api + "/")]
    assert not elsewhere, elsewhere
    troubles = [e["message"] for e in logged if e["level"] in ("SEVERE", "WARNING")]
    assert not troubles, troubles
