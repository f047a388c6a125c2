"""``/docs`` (Swagger UI) and ``/redoc`` (ReDoc) in headless Chromium with the network closed
(no host resolves but 127.0.0.1): both render the API's operations from files installed with
the package, the browser asks nothing of any other host (nor tries to: a load the pages'
Content-Security-Policy refuses counts too) and the console shows no error or warning.
Screenshots go to ``test-artifacts/``."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.api_fixtures import make_app, settings_for
from tests.live import OFFLINE, chromium, console, need_chromium, requested, screenshot, serve

pytestmark = pytest.mark.browser


def test_docs_and_redoc_render_the_operations_offline(tmp_path: Path) -> None:
    need_chromium()
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    app = make_app(settings_for(tmp_path / "d.db"))
    paths = app.openapi()["paths"]
    with serve(app) as api, chromium(OFFLINE, log_requests=True) as driver:
        driver.get(f"{api}/docs")
        WebDriverWait(driver, 30).until(
            lambda d: len(d.find_elements(By.CSS_SELECTOR, ".opblock")) >= len(paths))
        shown = {e.text.replace("\u200b", "") for e in
                 driver.find_elements(By.CSS_SELECTOR, ".opblock-summary-path")}
        assert {"/v1/kbs/{kb}/ask", "/v1/kbs/{kb}/urls", "/v1/admin/tenants"} <= shown
        assert "Problem" in driver.page_source  # the error shape is in the schema shown
        screenshot(driver, "docs-swagger.png")
        logged = console(driver)

        driver.get(f"{api}/redoc")
        WebDriverWait(driver, 30).until(lambda d: d.find_elements(
            By.CSS_SELECTOR, "[data-section-id^='operation/']"))
        assert "/v1/kbs/{kb}/ask" in driver.find_element(By.TAG_NAME, "body").get_attribute(
            "textContent")
        screenshot(driver, "docs-redoc.png")
        logged += console(driver)
        asked = requested(driver, attempted=True)
    elsewhere = [url for url in asked if not url.startswith((api, "data:", "blob:"))]
    assert asked and not elsewhere, elsewhere
    # ReDoc's sidebar showed its maker's logo from a CDN: refused by the policy, but logged
    troubles = [e["message"] for e in logged if e["level"] in ("SEVERE", "WARNING")]
    assert not troubles, troubles
