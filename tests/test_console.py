"""The research console through Streamlit's own testing API (AppTest), on the hashing embedder."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from citewise.engine import Engine
from citewise.kb import GateSetting
from citewise.stores.sqlite import open_sqlite
from tests.api_fixtures import COVERED, OUT_OF_SCOPE
from tests.helpers import SAMPLE

CONSOLE = str(Path(__file__).resolve().parent.parent / "citewise" / "ui" / "console.py")


@pytest.fixture
def db(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "console.db"
    store = open_sqlite(path)
    engine = Engine(store)
    engine.ingest(engine.open_kb("smoking", embedder="hashing:256"), [SAMPLE])
    store.close()
    monkeypatch.setenv("CITEWISE_DB", str(path))
    return path


def run(**params: str) -> AppTest:
    at = AppTest.from_file(CONSOLE, default_timeout=60)
    for k, v in params.items():
        at.query_params[k] = v
    return at.run()


def ask(at: AppTest, question: str) -> AppTest:
    at.text_input(key="question").input(question)
    return at.button[0].click().run()


def test_an_answer_links_its_citations_and_lists_retrieved_chunks(db: Path) -> None:
    at = ask(run(), COVERED)
    assert not at.exception
    texts = [m.value for m in at.markdown]
    assert any("[\\[1\\]](?kb=smoking&chunk=" in t for t in texts), texts
    assert any(t.startswith("[\\[1\\] varenicline\\.md") for t in texts)
    table = at.dataframe[0].value
    wanted = {"fused rank", "cosine", "cosine rank", "BM25", "BM25 rank", "RRF", "in context"}
    assert wanted <= set(table.columns)
    assert list(table["fused rank"]) == list(range(1, len(table) + 1))
    assert table["in context"].sum() == 8


def test_a_refusal_shows_reason_and_related_topics(db: Path) -> None:
    at = ask(run(), OUT_OF_SCOPE)
    assert not at.exception
    assert "does not support an answer" in at.warning[0].value
    assert any("Related topics" in m.value for m in at.markdown)


def test_a_citation_link_opens_the_passage_in_its_section(db: Path) -> None:
    at = ask(run(), COVERED)
    link = next(m.value for m in at.markdown if "chunk=" in m.value)
    chunk_id = link.split("chunk=")[1].split(")")[0]
    page = run(kb="smoking", chunk=chunk_id)
    assert not page.exception
    assert page.info and "0.5 mg once daily" in page.info[0].value.replace("\\", "")
    assert page.subheader[0].value.startswith("Varenicline") or "Dosing" in page.subheader[0].value
    assert run(kb="smoking", chunk="nope").error[0].value == "No passage nope in knowledge base smoking."


def test_calibration_page_says_uncalibrated_then_shows_buckets(db: Path) -> None:
    at = run()
    at.sidebar.radio(key="page").set_value("Calibration").run()
    assert "uncalibrated" in at.info[0].value
    store = open_sqlite(db)
    kb = store.get_kb("smoking")
    details = {"calibrated_at": "2026-11-30T04:00:00+00:00", "queries": 80, "max_covered_refusal": 0.05,
               "buckets": [
                   {"bucket": "covered", "n": 40, "refused": 2, "rate": 0.05, "low": 0.006, "high": 0.169},
                   {"bucket": "out_of_scope", "n": 20, "refused": 20, "rate": 1.0, "low": 0.83, "high": 1.0},
               ],
               "compared": {"top1": 0.31, "mean": 0.2}}
    setting = GateSetting("top1", 0.31, kb.config.embedder, kb.config.fingerprint(), "calibrated", details)
    store.update_kb("smoking", replace(kb.config, gate=setting))
    store.close()
    at = run()
    at.sidebar.radio(key="page").set_value("Calibration").run()
    assert not at.exception and not at.info
    assert list(at.dataframe[0].value["bucket"]) == ["covered", "out_of_scope"]
    assert at.metric[0].value == "0.310"
