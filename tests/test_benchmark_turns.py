"""The retrieval-latency benchmark's order of questions: each in turn, or in blocks."""

from __future__ import annotations

import pytest

from benchmarks.retrieval_latency import measure, table

pytestmark = pytest.mark.unit


def timers(asked: list[tuple[str, str]]):
    def timer(name: str):
        def once(question: str) -> dict[str, float]:
            asked.append((name, question))
            return {"total": 1.0}
        return once
    return {"a": timer("a"), "b": timer("b")}


@pytest.mark.heavy
def test_each_question_in_turn_or_each_system_a_block_in_a_row() -> None:
    asked: list[tuple[str, str]] = []
    measured, run = measure(timers(asked), ["q1", "q2", "q3"])
    assert asked[2:] == [("a", "q1"), ("b", "q1"), ("a", "q2"), ("b", "q2"), ("a", "q3"), ("b", "q3")]
    assert "the systems in turn" in table(measured, run)
    asked.clear()
    measured, run = measure(timers(asked), ["q1", "q2", "q3"], block=2)
    assert asked[:2] == [("a", "q1"), ("b", "q1")]  # each warmed up once
    assert asked[2:] == [("a", "q1"), ("a", "q2"), ("b", "q1"), ("b", "q2"), ("a", "q3"), ("b", "q3")]
    assert len(measured["a"]["total"]) == len(measured["b"]["total"]) == 3
    assert "each system 2 questions in a row" in table(measured, run)
