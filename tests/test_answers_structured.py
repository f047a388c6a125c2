"""Answers on the sample collection with the default local model: a table row cited with its
header, a sentence with the number asked for, no pronoun quoted without what it refers to."""

from __future__ import annotations

import pytest

from citewise.engine import Engine
from citewise.records import Answer
from tests.helpers import SAMPLE

pytestmark = pytest.mark.model

ROW = "| Time after quitting | What happens |\n| 20 minutes | Heart rate and blood pressure drop |"


@pytest.fixture(scope="module")
def sample(tmp_path_factory: pytest.TempPathFactory) -> tuple[Engine, object]:
    from citewise.stores.sqlite import open_sqlite

    engine = Engine(open_sqlite(tmp_path_factory.mktemp("structured") / "sample.db"))
    kb = engine.open_kb("smoking")
    engine.ingest(kb, [SAMPLE])
    return engine, kb


def answer(sample: tuple[Engine, object], question: str) -> Answer:
    engine, kb = sample
    result = engine.ask(kb, question)
    assert isinstance(result, Answer), getattr(result, "reason", "")
    return result


def test_blood_pressure_is_answered_from_the_timeline_with_its_table_row(sample) -> None:
    result = answer(sample, "How soon after quitting does blood pressure drop?")
    assert {c.doc_id for c in result.citations} == {"health-benefits-timeline.md"}
    assert "Within about 20 minutes, heart rate and blood pressure begin to fall" in result.text
    assert ROW in result.text and not result.dropped
    quotes = [c.quote for c in result.citations]
    assert any(q.startswith(ROW) for q in quotes)  # the row is the quote, under its header
    assert all(len(q) < 400 for q in quotes)  # units, not whole passages


def test_does_bupropion_cause_seizures_includes_the_one_in_a_thousand_sentence(sample) -> None:
    result = answer(sample, "Does bupropion cause seizures?")
    assert "1 in 1,000 people" in result.text
    assert result.citations[0].doc_id == "bupropion.md"


def test_the_varenicline_dosing_answer_keeps_to_the_schedule(sample) -> None:
    result = answer(sample, "How is varenicline dosed?")
    assert "Days 1 to 3: 0.5 mg once daily" in result.text
    assert "three in ten people" not in result.text
    assert "The standard adult schedule is:" in result.text  # the items under their introduction


@pytest.mark.parametrize("question", [
    "How is varenicline dosed?", "Which side effect is reported most often by people taking varenicline?",
    "What are the side effects of varenicline?", "How many people taking varenicline get nausea?",
])
def test_the_it_of_the_nausea_sentence_is_never_quoted_without_it(sample, question: str) -> None:
    text = answer(sample, question).text
    if "In clinical trials it affected" in text:
        assert text.index("Nausea is the most common side effect") < text.index("In clinical trials it")


def test_how_many_get_nausea_quotes_the_number_with_what_it_refers_to(sample) -> None:
    text = answer(sample, "How many people taking varenicline get nausea?").text
    assert text.startswith("Nausea is the most common side effect [1]. In clinical trials it "
                           "affected roughly three in ten people")
