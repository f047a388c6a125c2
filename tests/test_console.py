"""The research console through Streamlit's own testing API (AppTest), on the hashing embedder."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from citewise.kb import GateSetting
from citewise.stores.sqlite import open_sqlite
from tests.api_fixtures import COVERED, OUT_OF_SCOPE
from tests.helpers import sample_sqlite

pytestmark = pytest.mark.heavy  # servers, processes, deadlines or megabytes: make test, not make unit

CONSOLE = str(Path(__file__).resolve().parent.parent / "citewise" / "ui" / "console.py")


@pytest.fixture
def db(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "console.db"
    sample_sqlite(path)
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
    assert "does not cover your question" in at.warning[0].value
    topics = [b for b in at.button if b.key and b.key.startswith("topic-")]
    assert topics  # the closest topics, as buttons that ask about them


def _pool_gate(db: Path) -> None:
    """With the hashing embedder, the pool cosine at 0.08 answers "How is varenicline dosed?"
    and the topics' questions, and refuses "How is it dosed?" alone and the out-of-scope one."""
    store = open_sqlite(db)
    kb = store.get_kb("smoking")
    gate = GateSetting("pool", 0.08, kb.config.embedder, kb.config.fingerprint(), "calibrated")
    store.update_kb("smoking", replace(kb.config, gate=gate))
    store.close()


def test_a_follow_up_is_read_with_the_conversation(db: Path) -> None:
    _pool_gate(db)
    at = ask(ask(run(), "What is varenicline?"), "How is it dosed?")
    assert not at.exception
    assert any("read as: How is varenicline dosed?" in c.value for c in at.caption)
    assert [e.label for e in at.expander] == ["What is varenicline?"]
    assert any(t.startswith("[\\[1\\] varenicline\\.md") for t in (m.value for m in at.markdown))
    at = at.button(key="new-conversation").click().run()
    at = ask(at, "How is it dosed?")  # a new conversation: nothing to refer to
    assert "does not cover your question" in at.warning[0].value and not at.expander


def test_a_clicked_topic_is_asked(db: Path) -> None:
    _pool_gate(db)
    at = ask(run(), OUT_OF_SCOPE)
    topic = next(b for b in at.button if b.key and b.key.startswith("topic-"))
    at = topic.click().run()
    assert not at.exception and len(at.warning) == 1  # the earlier refusal's, in its expander
    asked = at.markdown[0].value  # the latest question, in bold
    assert asked.startswith("**") and "›" not in asked
    assert any("Sources" in m.value for m in at.markdown)
    assert [e.label for e in at.expander] == [OUT_OF_SCOPE]


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


TABLE_QUESTION = ("Lozenge 2 mg 4 mg if first cigarette within 30 minutes of waking otherwise 2 mg "
            "1 lozenge every 1-2 hours")


def test_a_table_row_shows_as_a_table_in_the_answer_and_its_quote(db: Path) -> None:
    at = ask(run(), TABLE_QUESTION)
    assert not at.exception
    texts = [m.value for m in at.markdown]
    header = "| Product | Strengths | How to choose the strength | Typical use |\n| --- | --- | --- | --- |"
    answer = next(t for t in texts if t.startswith("| Product"))
    assert answer.startswith(header) and "| Lozenge | 2 mg, 4 mg |" in answer
    assert "(?kb=smoking&chunk=" in answer  # the marker in the row's last cell is a link
    source = next(t for t in texts if "nicotine\\-replacement\\-therapy\\.md" in t)
    assert "> " + header.replace("\n", "\n> ") in source  # the quote: the row under its header
