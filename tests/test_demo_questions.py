"""The sample collection with the default local model: what `make demo` shows must hold."""

from __future__ import annotations

import re

import pytest

from citewise.engine import Engine
from citewise.records import Answer, Refusal, Turn
from tests.helpers import SAMPLE

pytestmark = pytest.mark.model


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> tuple[Engine, object]:
    from citewise.stores.sqlite import open_sqlite

    engine = Engine(open_sqlite(tmp_path_factory.mktemp("demo") / "demo.db"))
    kb = engine.open_kb("smoking")
    report = engine.ingest(kb, [SAMPLE])
    assert len(report.added) == 10 and not report.skipped
    return engine, kb


def test_covered_question_is_answered_with_citations(demo: tuple[Engine, object]) -> None:
    engine, kb = demo
    result = engine.ask(kb, "When do nicotine withdrawal symptoms peak?")
    assert isinstance(result, Answer), getattr(result, "reason", "")
    assert result.citations[0].doc_id == "nicotine-withdrawal.md"
    assert "[1]" in result.text


def test_out_of_scope_question_is_refused_without_pretending_anything_is_close(
    demo: tuple[Engine, object],
) -> None:
    engine, kb = demo
    result = engine.ask(kb, "What is the best way to bake sourdough bread?")
    assert isinstance(result, Refusal) and result.path == "gate"
    assert len(result.chunks) == 5 and not result.warnings
    # every chunk is below the measured level of unrelated questions: no headings are offered
    assert result.related == () and "Nothing in it comes close" in result.reason
    assert "does not cover your question" in result.reason and "rephrase" in result.reason


def test_on_topic_question_without_an_answer_names_the_closest_topics(
    demo: tuple[Engine, object],
) -> None:
    engine, kb = demo
    result = engine.ask(kb, "Does cytisine work for quitting smoking?")
    assert isinstance(result, Refusal) and result.path == "gate", getattr(result, "text", "")
    assert result.related and len(set(result.related)) == len(result.related)
    assert "The closest topics it does cover are: " + "; ".join(result.related) in result.reason
    assert "You can ask about one of those instead." in result.reason
    # plain words: the gate's numbers stay in the decision, not in the reason
    assert not re.search(r"\d", result.reason.split(" The closest topics")[0])
    assert "threshold" not in result.reason and "cosine" not in result.reason


def test_the_two_part_question_names_the_part_the_sample_does_not_cover(
    demo: tuple[Engine, object],
) -> None:
    engine, kb = demo
    result = engine.ask(kb, "Can I use e-cigarettes while pregnant, and what does the NHS say "
                            "about vaping in Japan?")
    assert isinstance(result, Answer), getattr(result, "reason", "")
    assert result.uncovered == ("what does the NHS say about vaping in Japan?",)
    assert result.text.endswith("“what does the NHS say about vaping in Japan”, so that part of "
                                "your question is not answered.")
    assert "smoking-in-pregnancy.md" in {c.doc_id for c in result.citations}


def test_how_is_it_dosed_after_what_is_varenicline_is_answered_about_varenicline(
    demo: tuple[Engine, object],
) -> None:
    engine, kb = demo
    alone = engine.ask(kb, "How is it dosed?")
    assert isinstance(alone, Refusal)
    first = engine.ask(kb, "What is varenicline?")
    assert isinstance(first, Answer)
    history = [Turn("user", "What is varenicline?"), Turn("assistant", first.text)]
    result = engine.ask(kb, "How is it dosed?", history=history)
    assert isinstance(result, Answer), getattr(result, "reason", "")
    assert result.standalone == "How is varenicline dosed?"
    assert {c.doc_id for c in result.citations} == {"varenicline.md"}
    assert any("Dosing" in c.section for c in result.citations)
