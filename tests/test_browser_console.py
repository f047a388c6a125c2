"""Browser runs of the research console, started as `citewise console` starts it
(``console_command``): Chromium asks two questions and sees the newest turn below the first,
opens a source's passage in a dialog over the conversation, reads the retrieved-chunks table's
columns, finds no "Deploy" button; asks a follow-up, then clicks a refusal's topic; and picks
a knowledge base that stays picked on the Upload page and back, where an unsupported file is
named with its reason and a stored file is then asked about. Screenshots go to
``test-artifacts/``."""

from __future__ import annotations

import os
import subprocess
import time
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from citewise.cli.serve import console_command
from citewise.engine import Engine
from citewise.kb import GateSetting
from citewise.stores.sqlite import open_sqlite
from tests.api_fixtures import COVERED, OUT_OF_SCOPE
from tests.helpers import ROOT, SAMPLE, sample_sqlite
from tests.live import chromium, free_port, need_chromium, screenshot, stop

pytestmark = pytest.mark.browser
MESSAGE = '[data-testid="stChatMessage"]'
CHAT_INPUT = '[data-testid="stChatInputTextArea"]'
DIALOG = '[data-testid="stDialog"] [role="dialog"]'
WITHDRAWAL = "How long do nicotine withdrawal symptoms last?"


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
    """The console on ``db`` in its own process, with the command line `citewise console`
    runs, until the block ends; yields its URL."""
    port = free_port()
    env = {**os.environ, "PYTHONPATH": str(ROOT), "CITEWISE_DB": str(db)}
    proc = subprocess.Popen(console_command(port, "127.0.0.1"), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, env=env)
    try:
        base = f"http://127.0.0.1:{port}"
        wait_for(f"{base}/_stcore/health", proc)
        yield base
    finally:
        stop(proc)
        if proc.stdout:
            proc.stdout.close()


class Page:
    """The console in Chromium, and what the tests do with it."""

    def __init__(self, driver: Any) -> None:
        from selenium.webdriver.support.ui import WebDriverWait

        self.driver, self.wait = driver, WebDriverWait(driver, 60)

    def find(self, css: str) -> list[Any]:
        from selenium.webdriver.common.by import By

        return self.driver.find_elements(By.CSS_SELECTOR, css)

    def body(self) -> str:
        return self.find("body")[0].text

    def until(self, check: Callable[[], Any]) -> Any:
        return self.wait.until(lambda _: check())

    def ask(self, question: str) -> str:
        """Ask in the chat box; the text of the answer's message once it is whole."""
        from selenium.webdriver.common.keys import Keys

        before = len(self.find(MESSAGE))
        field = self.until(lambda: self.find(CHAT_INPUT) and self.find(CHAT_INPUT)[0])
        field.send_keys(question)
        field.send_keys(Keys.ENTER)
        self.until(lambda: len(self.find(MESSAGE)) == before + 2
                   and "Retrieved chunks" in self.find(MESSAGE)[-1].text)
        return self.find(MESSAGE)[-1].text

    def users(self) -> list[tuple[str, int]]:
        """The questions in the chat, as shown top to bottom: each one's text and height."""
        return [(m.find_element("css selector", '[data-testid="stChatMessageContent"]').text,
                 m.location["y"]) for m in self.find(MESSAGE)
                if m.find_elements("css selector", '[data-testid="stChatMessageAvatarUser"]')]

    def settled(self, element: Any) -> bool:
        """Whether ``element`` stays where it is for a fifth of a second (no fold or scroll
        still moving it, which makes a click land elsewhere)."""
        where = element.location
        time.sleep(0.2)
        return bool(element.location == where)

    def go(self, name: str) -> None:
        self.until(lambda: next((e for e in self.find('label[data-testid="stRadioOption"]')
                                 if e.text == name), None)).click()

    def pick(self, label: str, option: str) -> None:
        """Choose ``option`` in the select box labelled ``label``."""
        box = self.until(lambda: self.find(f'[data-testid="stSelectbox"] input[aria-label="{label}"]'))
        box[0].find_element("xpath", "..").find_element("css selector", 'button[aria-label="Open"]').click()
        self.until(lambda: next((e for e in self.find('[role="option"]') if e.text == option),
                                None)).click()

    def chosen(self, label: str) -> str:
        box = self.find(f'[data-testid="stSelectbox"] input[aria-label="{label}"]')[0]
        return str(box.get_attribute("value"))


def test_console_reads_as_a_chat_and_opens_a_source_over_it(tmp_path: Path) -> None:
    need_chromium()
    db = sample_sqlite(tmp_path / "console.db")
    with console(db) as base, chromium() as driver:
        driver.set_window_size(1280, 1300)
        driver.get(base)
        page = Page(driver)
        page.until(lambda: page.find(CHAT_INPUT))
        # Streamlit's toolbar without its developer options: no "Deploy" button
        assert not page.find('[data-testid="stAppDeployButton"]') and "Deploy" not in page.body()

        page.ask(WITHDRAWAL)
        answer = page.ask(COVERED)
        assert "0.5 mg once daily" in answer and "Sources" in answer
        (first, y1), (second, y2) = page.users()
        assert (first, second) == (WITHDRAWAL, COVERED) and y1 < y2  # the newest at the bottom
        assert page.find(MESSAGE)[-1].location["y"] > y2
        assert not page.find("a[href*='chunk=']")  # markers and sources are no links away
        screenshot(driver, "console-chat.png")

        expander = page.find(f"{MESSAGE} [data-testid='stExpander'] summary")[-1]
        driver.execute_script("arguments[0].scrollIntoView()", expander)
        expander.click()
        headers = page.until(lambda: [h.get_attribute("textContent") for h in page.find(
            "[data-testid='stDataFrame'] [role='columnheader']")] or None)
        assert headers == ["order", "document", "section", "meaning match", "word match",
                           "in the answer", "passage"], headers
        cells = [c.get_attribute("textContent") for c in page.find(
            "[data-testid='stDataFrame'] [role='gridcell']")]
        assert cells and not [c for c in cells if c in ("None", "nan")], cells
        time.sleep(0.5)  # the grid draws after its rows are known
        screenshot(driver, "console-chunks.png")
        expander.click()  # folded again: then the page stands still, and a click lands
        page.until(lambda: not any(e.is_displayed() for e in page.find("[data-testid='stDataFrame']")))

        source = page.find(f"{MESSAGE} div[class*='st-key-cite-2-'] button")[0]
        assert source.text.endswith("[1] Varenicline › Dosing schedule")  # after its icon
        driver.execute_script("arguments[0].scrollIntoView({block: 'center'})", source)
        page.until(lambda: page.settled(source))
        source.click()
        page.until(lambda: page.find(f"{DIALOG} [data-testid='stAlert']"))  # drawn to the end
        dialog = page.find(DIALOG)[0]
        assert dialog.text.startswith("[1] Varenicline") and "Dosing schedule" in dialog.text
        assert "0.5 mg once daily" in dialog.find_element(
            "css selector", '[data-testid="stAlert"]').text  # the cited passage, marked
        assert driver.current_url.rstrip("/") == base  # no page change
        assert [text for text, _ in page.users()] == [WITHDRAWAL, COVERED]  # still under it
        time.sleep(0.5)
        screenshot(driver, "console-citation.png")
        dialog.find_element("css selector", 'button[aria-label="Close"]').click()
        page.until(lambda: not page.find(DIALOG))
        assert len(page.find(MESSAGE)) == 4


def test_console_keeps_the_conversation_and_asks_a_clicked_topic(tmp_path: Path) -> None:
    need_chromium()
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
        page = Page(driver)
        page.ask("What is varenicline?")
        assert "read as: How is varenicline dosed?" in page.ask("How is it dosed?")
        screenshot(driver, "console-follow-up.png")

        assert "does not cover your question" in page.ask(OUT_OF_SCOPE)
        topics = page.until(lambda: page.find('div[class*="st-key-topic-3-"] button') or None)
        asked = topics[0].text.replace(" › ", ": ")  # the topic as a question
        topics[0].click()
        page.until(lambda: len(page.find(MESSAGE)) == 8
                   and "Sources" in page.find(MESSAGE)[-1].text)
        assert asked in page.users()[-1][0]  # asked below the refusal
        screenshot(driver, "console-topic-clicked.png")


def test_console_keeps_the_knowledge_base_and_names_a_rejected_file(tmp_path: Path) -> None:
    need_chromium()
    db = sample_sqlite(tmp_path / "console.db")
    store = open_sqlite(db)
    engine = Engine(store)
    engine.ingest(engine.open_kb("vaping", embedder="hashing:256"), [SAMPLE / "e-cigarettes.md"])
    store.close()
    saffron, broken, notes = tmp_path / "saffron.md", tmp_path / "broken.pdf", tmp_path / "notes.xyz"
    saffron.write_text("# Saffron harvest\n\nSaffron is harvested by hand from the crocus flower "
                       "in autumn; each flower gives three red stigmas.\n")
    broken.write_bytes(b"not a pdf at all")
    notes.write_text("plain words in a file of a type citewise does not read\n")
    with console(db) as base, chromium() as driver:
        driver.set_window_size(1280, 1100)
        driver.get(base)
        page = Page(driver)
        page.pick("Knowledge base", "vaping")
        page.until(lambda: "Ask vaping" in page.body())

        page.go("Upload")
        page.until(lambda: page.find('input[type="file"]'))
        assert page.chosen("Into knowledge base") == "vaping"  # picked on the Ask page
        assert "MB each" in page.body()
        page.find('input[type="file"]')[0].send_keys(f"{saffron}\n{broken}\n{notes}")
        page.until(lambda: "notes.xyz" in page.body() and "broken.pdf" in page.body())
        page.find("div.st-key-upload button")[0].click()
        page.until(lambda: "Done: 1 of 3 files stored in vaping, 2 rejected" in page.body())
        body = page.body()
        assert "broken.pdf: not a readable PDF file" in body
        assert "notes.xyz: unsupported file type .xyz; supported: .docx," in body
        screenshot(driver, "console-upload.png")

        page.go("Ask")
        page.until(lambda: "Ask vaping" in page.body())
        assert page.chosen("Knowledge base") == "vaping"  # still, after the Upload page
        answer = page.ask("How is saffron harvested by hand from the crocus flower?")
        assert "Saffron harvest" in answer
        screenshot(driver, "console-upload-asked.png")
