"""The sample collection with the default local model: what `make demo` shows must hold."""

from __future__ import annotations

import pytest

from citewise.engine import Engine
from citewise.records import Answer, Refusal
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
    assert result.related == () and "Nothing in it is close to the question" in result.reason
    assert "does not support an answer" in result.reason and "rephrase" in result.reason


def test_on_topic_question_without_an_answer_names_the_closest_topics(
    demo: tuple[Engine, object],
) -> None:
    engine, kb = demo
    result = engine.ask(kb, "Does cytisine work for quitting smoking?")
    assert isinstance(result, Refusal) and result.path == "gate", getattr(result, "text", "")
    assert result.related and len(set(result.related)) == len(result.related)
    assert "The closest topics it has are: " + "; ".join(result.related) in result.reason
    assert "ask again using its terms" in result.reason
