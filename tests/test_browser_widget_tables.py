"""The chat widget in headless Chromium shows a table row as a table: in the answer, under its
header, and in what the citation quotes; the whole passage opens on request."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.api_fixtures import tenant
from tests.live import chromium, need_chromium, screenshot
from tests.test_browser_widget import ask, open_chat, shop

pytestmark = pytest.mark.browser

QUESTION = ("Lozenge 2 mg 4 mg if first cigarette within 30 minutes of waking otherwise 2 mg "
            "1 lozenge every 1-2 hours")


def test_widget_shows_a_table_row_under_its_header(tmp_path: Path) -> None:
    need_chromium()
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    with shop(tmp_path / "w.db") as (api, setup, owner, site, page_origin, settings):
        widget = tenant(setup, "shop", kind="widget", kb="docs", origins=[page_origin])
        with chromium() as driver:
            open_chat(driver, api, site, page_origin, widget.key, "<h1>Guide</h1>")
            answer = ask(driver, QUESTION, 1)
            assert answer.get_attribute("data-status") == "answered", answer.text
            table = answer.find_element(By.CSS_SELECTOR, ".cw-text table.cw-table")
            assert [th.text for th in table.find_elements(By.CSS_SELECTOR, "th")][:2] == [
                "Product", "Strengths"]
            row = table.find_elements(By.CSS_SELECTOR, "tr")[1]
            assert row.find_element(By.CSS_SELECTOR, "td").text == "Lozenge"
            row.find_element(By.CSS_SELECTOR, ".cw-cite").click()  # the marker in its last cell
            box = WebDriverWait(driver, 10).until(
                lambda d: answer.find_element(By.CSS_SELECTOR, ".cw-passage"))
            quoted = box.find_element(By.CSS_SELECTOR, "table.cw-table")
            assert "Lozenge" in quoted.text and "Product" in quoted.text
            screenshot(driver, "widget-table.png")
            box.find_element(By.CSS_SELECTOR, ".cw-more").click()
            WebDriverWait(driver, 10).until(
                lambda d: not box.find_elements(By.CSS_SELECTOR, ".cw-more"))
            assert "Gum" in box.text  # the whole passage: other rows too
