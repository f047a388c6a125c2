"""The research console through Streamlit's own testing API (AppTest), on the hashing embedder:
the Ask page as a chat, a citation's passage in a dialog, the retrieved-chunks table in plain
words, the knowledge base picked kept from page to page, and the Calibration page."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from citewise.engine import Engine
from citewise.kb import GateSetting
from citewise.stores.sqlite import open_sqlite
from tests.api_fixtures import COVERED, OUT_OF_SCOPE
from tests.helpers import SAMPLE, sample_sqlite

pytestmark = pytest.mark.heavy  # servers, processes, deadlines or megabytes: make test, not make unit

CONSOLE = str(Path(__file__).resolve().parent.parent / "citewise" / "ui" / "console.py")


@pytest.fixture
def db(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "console.db"
    sample_sqlite(path)
    monkeypatch.setenv("CITEWISE_DB", str(path))
    return path


def run() -> AppTest:
    return AppTest.from_file(CONSOLE, default_timeout=60).run()


def ask(at: AppTest, question: str) -> AppTest:
    return at.chat_input(key="question").set_value(question).run()


def said(at: AppTest, who: str) -> list[str]:
    """What the chat's messages of ``who`` ("user" or "assistant") say, oldest first."""
    return ["\n".join(m.value for m in message.markdown) for message in at.chat_message
            if message.name == who]


def sources(at: AppTest) -> list:
    return [b for b in at.button if b.key and b.key.startswith("cite-")]


def test_an_answer_lists_its_sources_as_buttons_and_its_chunks_in_plain_words(db: Path) -> None:
    at = ask(run(), COVERED)
    assert not at.exception
    assert said(at, "user") == [COVERED]
    assert not any("](?" in m.value for m in at.markdown)  # the markers are plain text
    labels = [b.label for b in sources(at)]
    assert labels and labels[0].startswith("\\[1\\] Varenicline") and " › " in labels[0], labels
    table = at.dataframe[0].value
    assert list(table.columns) == ["order", "document", "section", "meaning match", "word match",
                                   "in the answer", "passage"]
    assert list(table["order"]) == list(range(1, len(table) + 1))
    assert set(table["in the answer"]) == {"yes", "no"}
    assert (table["in the answer"] == "yes").sum() == len({b.label for b in sources(at)})
    assert not table.isna().any().any()
    assert not [v for v in table.astype(str).to_numpy().ravel() if v in ("None", "nan", "")]
    assert "—" in set(table["word match"])  # a chunk the keyword search did not find
    assert at.expander[0].label == f"Retrieved chunks ({len(table)})"


def test_a_refusal_shows_reason_and_related_topics(db: Path) -> None:
    at = ask(run(), OUT_OF_SCOPE)
    assert not at.exception
    assert "does not cover your question" in at.warning[0].value
    topics = [b for b in at.button if b.key and b.key.startswith("topic-")]
    assert topics  # the closest topics, as buttons that ask about them
    assert set(at.dataframe[0].value["in the answer"]) == {"no"}


def test_a_source_opens_its_passage_in_its_section_over_the_conversation(db: Path) -> None:
    at = ask(run(), COVERED)
    at = sources(at)[0].click().run()
    assert not at.exception
    assert at.info and "0.5 mg once daily" in at.info[0].value.replace("\\", "")
    assert at.get("dialog")[0].proto.dialog.title == "[1] Varenicline"  # the document's title
    assert "Dosing" in at.subheader[0].value
    assert any("in this section" in c.value for c in at.caption)
    assert said(at, "user") == [COVERED] and sources(at)  # the conversation is still there
    at = at.run()  # any other run of the page closes the dialog
    assert not at.info and said(at, "user") == [COVERED]
    at.session_state["open-passage"] = ("smoking", "nope", 1)  # its document changed since
    at = at.run()
    assert at.error[0].value.startswith("No passage nope in knowledge base smoking any more")


def _pool_gate(db: Path) -> None:
    """With the hashing embedder, the pool cosine at 0.08 answers "How is varenicline dosed?"
    and the topics' questions, and refuses "How is it dosed?" alone and the out-of-scope one."""
    store = open_sqlite(db)
    kb = store.get_kb("smoking")
    gate = GateSetting("pool", 0.08, kb.config.embedder, kb.config.fingerprint(), "calibrated")
    store.update_kb("smoking", replace(kb.config, gate=gate))
    store.close()


def test_a_follow_up_is_read_with_the_conversation_oldest_first(db: Path) -> None:
    _pool_gate(db)
    at = ask(ask(run(), "What is varenicline?"), "How is it dosed?")
    assert not at.exception
    assert said(at, "user") == ["What is varenicline?", "How is it dosed?"]  # newest at the bottom
    assert any("read as: How is varenicline dosed?" in c.value for c in at.caption)
    assert [b.key for b in sources(at)][0].startswith("cite-1-")
    assert any(k.startswith("cite-2-") for k in (b.key for b in sources(at)))
    at = at.button(key="new-conversation").click().run()
    assert not at.chat_message
    at = ask(at, "How is it dosed?")  # a new conversation: nothing to refer to
    assert "does not cover your question" in at.warning[0].value
    assert said(at, "user") == ["How is it dosed?"]


def test_a_clicked_topic_is_asked_below_the_refusal(db: Path) -> None:
    _pool_gate(db)
    at = ask(run(), OUT_OF_SCOPE)
    topic = next(b for b in at.button if b.key and b.key.startswith("topic-"))
    at = topic.click().run()
    assert not at.exception and len(at.warning) == 1  # the earlier refusal's
    asked = said(at, "user")
    assert len(asked) == 2 and asked[0] == OUT_OF_SCOPE and "›" not in asked[1]
    assert "Sources" in said(at, "assistant")[1]


def test_the_knowledge_base_picked_stays_picked_across_pages(db: Path) -> None:
    store = open_sqlite(db)
    engine = Engine(store)
    engine.ingest(engine.open_kb("vaping", embedder="hashing:256"), [SAMPLE / "e-cigarettes.md"])
    store.close()
    at = run()
    at = at.sidebar.selectbox(key="kb").set_value("vaping").run()
    at = at.sidebar.radio(key="page").set_value("Upload").run()
    assert at.selectbox(key="upload-kb").value == "vaping"  # the Upload page's default
    at = at.sidebar.radio(key="page").set_value("Ask").run()
    assert at.sidebar.selectbox(key="kb").value == "vaping" and at.header[0].value == "Ask vaping"
    at = at.sidebar.radio(key="page").set_value("Upload").run()
    at = at.selectbox(key="upload-kb").set_value("smoking").run()  # picked there: kept too
    at = at.sidebar.radio(key="page").set_value("Calibration").run()
    assert at.sidebar.selectbox(key="kb").value == "smoking"


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
    assert answer.endswith("up to 12 weeks \\[1\\] |")  # the marker in the row's last cell
    assert any(b.label.startswith("\\[1\\] Nicotine Replacement") for b in sources(at))
    assert any(t.startswith("> " + header.replace("\n", "\n> ")) for t in texts)  # the quote

