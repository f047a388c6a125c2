"""Browser runs of the research console: `streamlit run` on a free port; Chromium asks a
question, sees the cited answer and the retrieved-chunks table, and opens a citation; and
asks a follow-up in one conversation, then clicks a refusal's topic to ask about it; and
uploads files on the Upload page, then asks about the new document."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

import pytest

from citewise.engine import Engine
from citewise.kb import GateSetting
from citewise.stores.sqlite import open_sqlite
from tests.api_fixtures import COVERED, OUT_OF_SCOPE
from tests.helpers import SAMPLE, sample_sqlite
from tests.live import chromium, free_port, need_chromium, screenshot, stop

pytestmark = pytest.mark.browser
CONSOLE = Path(__file__).resolve().parent.parent / "citewise" / "ui" / "console.py"


def wait_for(url: str, proc: subprocess.Popen, seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"streamlit exited: {proc.stdout.read() if proc.stdout else ''}")
        try:
            with urllib.request.urlopen(url, timeout=2) as r:
                if r.status == 200:
                    return
        except OSError:
            time.sleep(0.3)
    raise RuntimeError("the console did not start")


@contextmanager
def console(db: Path) -> Iterator[str]:
    """The console on ``db`` in its own process, until the block ends; yields its URL."""
    port = free_port()
    env = {**os.environ, "PYTHONPATH": str(CONSOLE.parent.parent.parent),
           "STREAMLIT_BROWSER_GATHER_USAGE_STATS": "false"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "streamlit", "run", str(CONSOLE), "--server.port", str(port),
         "--server.address", "127.0.0.1", "--server.headless", "true",
         "--browser.gatherUsageStats", "false", "--", "--db", str(db)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
    )
    try:
        base = f"http://127.0.0.1:{port}"
        wait_for(f"{base}/_stcore/health", proc)
        yield base
    finally:
        stop(proc)
        if proc.stdout:
            proc.stdout.close()


def test_console_smoke_in_a_real_browser(tmp_path: Path) -> None:
    need_chromium()
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys
    from selenium.webdriver.support.ui import WebDriverWait

    db = sample_sqlite(tmp_path / "console.db")
    with console(db) as base, chromium() as driver:
        driver.get(base)
        wait = WebDriverWait(driver, 60)
        field = wait.until(lambda d: d.find_element(By.CSS_SELECTOR, 'input[aria-label="Question"]'))
        field.send_keys(COVERED)
        field.send_keys(Keys.ENTER)
        wait.until(lambda d: "Sources" in d.find_element(By.TAG_NAME, "body").text)
        body = driver.find_element(By.TAG_NAME, "body").text
        assert "0.5 mg once daily" in body and "Retrieved chunks" in body
        anchors = driver.find_elements(By.CSS_SELECTOR, "a[href*='chunk=']")
        links = [a.get_attribute("href") for a in anchors]
        assert links
        screenshot(driver, "console-answer.png")
        driver.get(links[0])
        wait.until(lambda d: "smoking ›" in d.find_element(By.TAG_NAME, "body").text)
        assert "varenicline.md" in driver.find_element(By.TAG_NAME, "body").text
        screenshot(driver, "console-passage.png")


def test_console_keeps_the_conversation_and_asks_a_clicked_topic(tmp_path: Path) -> None:
    need_chromium()
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys
    from selenium.webdriver.support.ui import WebDriverWait

    db = tmp_path / "console.db"
    store = open_sqlite(db)
    engine = Engine(store)
    kb = engine.open_kb("smoking", embedder="hashing:256")
    engine.ingest(kb, [SAMPLE])
    # with the hashing embedder, the pool cosine at 0.08 answers "How is varenicline dosed?"
    # and refuses "How is it dosed?" read alone, and the out-of-scope question
    gate = GateSetting("pool", 0.08, kb.config.embedder, kb.config.fingerprint(), "calibrated")
    store.update_kb("smoking", replace(kb.config, gate=gate))
    store.close()
    with console(db) as base, chromium() as driver:
        driver.get(base)
        wait = WebDriverWait(driver, 60)

        def ask(question: str, expect: str) -> str:
            field = wait.until(lambda d: d.find_element(By.CSS_SELECTOR, 'input[aria-label="Question"]'))
            field.send_keys(question)
            field.send_keys(Keys.ENTER)
            wait.until(lambda d: expect in d.find_element(By.TAG_NAME, "body").text)
            return driver.find_element(By.TAG_NAME, "body").text

        ask("What is varenicline?", "Sources")
        body = ask("How is it dosed?", "read as: How is varenicline dosed?")
        assert "Earlier in this conversation" in body and "What is varenicline?" in body
        screenshot(driver, "console-follow-up.png")

        ask(OUT_OF_SCOPE, "does not cover your question")
        topics = wait.until(lambda d: d.find_elements(
            By.CSS_SELECTOR, 'div[class*="st-key-topic-"] button') or None)
        asked = topics[0].text.replace(" › ", ": ")  # the topic as a question
        topics[0].click()

        def latest(d) -> str:
            return d.find_element(By.TAG_NAME, "body").text.split("Earlier in this conversation")[0]

        wait.until(lambda d: asked in latest(d) and "Sources" in latest(d))
        screenshot(driver, "console-topic-clicked.png")


def test_console_uploads_a_file_as_a_job_then_answers_from_it(tmp_path: Path) -> None:
    need_chromium()
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys
    from selenium.webdriver.support.ui import WebDriverWait

    db = sample_sqlite(tmp_path / "console.db")
    saffron, broken = tmp_path / "saffron.md", tmp_path / "broken.pdf"
    saffron.write_text("# Saffron harvest\n\nSaffron is harvested by hand from the crocus flower "
                       "in autumn; each flower gives three red stigmas.\n")
    broken.write_bytes(b"not a pdf at all")
    with console(db) as base, chromium() as driver:
        driver.get(base)
        wait = WebDriverWait(driver, 60)

        def body() -> str:
            return driver.find_element(By.TAG_NAME, "body").text

        def page(name: str) -> None:
            wait.until(lambda d: next((e for e in d.find_elements(
                By.CSS_SELECTOR, 'label[data-testid="stRadioOption"]') if e.text == name), None)).click()

        page("Upload")
        files = wait.until(lambda d: d.find_element(By.CSS_SELECTOR, 'input[type="file"]'))
        files.send_keys(f"{saffron}\n{broken}")
        wait.until(lambda d: "broken.pdf" in body() and "saffron.md" in body())
        driver.find_element(By.CSS_SELECTOR, "div.st-key-upload button").click()
        wait.until(lambda d: "Done: 1 of 2 documents stored in smoking" in body())
        assert "broken.pdf: not a readable PDF file" in body()
        screenshot(driver, "console-upload-done.png")

        page("Ask")
        field = wait.until(lambda d: d.find_element(By.CSS_SELECTOR, 'input[aria-label="Question"]'))
        field.send_keys("How is saffron harvested by hand from the crocus flower?")
        field.send_keys(Keys.ENTER)
        wait.until(lambda d: "Sources" in body())
        assert "saffron.md" in body()
        screenshot(driver, "console-upload-asked.png")
