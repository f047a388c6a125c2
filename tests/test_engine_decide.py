"""``Engine.decide``: the retrieve -> signals -> gate step of ``ask``, on its own (hashing embedder)."""

from __future__ import annotations

import contextlib
from dataclasses import replace

import pytest

from citewise.answer import evidence, gate
from citewise.answer.questions import check_question
from citewise.calibrate.querysets import load_queries
from citewise.engine import Engine
from citewise.kb import GateSetting
from tests.helpers import SAMPLE, SAMPLE_QUERIES


@pytest.mark.heavy
def test_decide_is_what_ask_decides(engine: Engine) -> None:
    kb = engine.open_kb("s", embedder="hashing:256")
    engine.ingest(kb, [SAMPLE])
    # a policy that reads the question's words too, so a question passed differently would show
    setting = GateSetting("combined:0.25", 0.45, kb.config.embedder, kb.config.fingerprint(), "calibrated")
    kb = engine.store.update_kb("s", replace(kb.config, gate=setting))
    answered = []
    for q in load_queries(SAMPLE_QUERIES / "smoking-cessation.test.jsonl"):
        stages: dict[str, object] = {}
        result = engine.ask(kb, q.query, on_stage=stages.__setitem__)
        decided = engine.decide(kb, q.query)
        assert decided.decision == result.decision == stages["decision"]
        assert decided.retrieved.context == stages["retrieved"].context  # type: ignore[attr-defined]
        assert decided.decision.signal == gate.get_policy("combined:0.25").value(decided.signals)
        # a caller that embedded the question itself (in a batch) gets the same
        again = engine.decide(kb, check_question(q.query), decided.retrieved.query_vector)
        assert (again.signals, again.decision) == (decided.signals, decided.decision)
        answered.append(decided.decision.answer)
    assert 0 < sum(answered) < len(answered)  # both sides of the gate were seen


def test_decide_takes_another_gate_and_settings(engine: Engine) -> None:
    kb = engine.open_kb("s", embedder="hashing:256")
    engine.ingest(kb, [SAMPLE])
    question = "How is varenicline dosed?"
    strict = engine.decide(kb, question, the_gate=gate.ThresholdGate("top1", 1.0))
    assert not strict.decision.answer and strict.decision.threshold == 1.0
    narrow = engine.decide(kb, question, settings=replace(kb.config.retrieval, context_k=2))
    assert len(narrow.retrieved.context) == 2
    assert narrow.signals.n_context == 2


@pytest.mark.heavy
def test_decide_reads_the_version_once_and_decides_the_same(
        engine: Engine, monkeypatch: pytest.MonkeyPatch) -> None:
    """One ``SELECT version`` per question (``store.pinned``), with the chunks and their gate
    stems from the keyword index's table, and the very candidates, signals and decisions of
    the path that reads the version on every call, the chunks from SQL and stems them."""
    kb = engine.open_kb("s", embedder="hashing:256")
    engine.ingest(kb, [SAMPLE])
    store = engine.store
    statements: list[str] = []
    rows = store.db.rows  # type: ignore[attr-defined]

    def counted(sql: str, params: tuple[object, ...] = ()) -> list[tuple[object, ...]]:
        statements.append(sql)
        return rows(sql, params)

    monkeypatch.setattr(store.db, "rows", counted)  # type: ignore[attr-defined]
    questions = [q.query for q in load_queries(SAMPLE_QUERIES / "smoking-cessation.test.jsonl")]
    engine.decide(kb, questions[0])  # builds the indexes
    stemmed: list[object] = []
    stem_sets = store.stem_sets
    monkeypatch.setattr(store, "stem_sets", lambda kb, keys, terms: stemmed.append(
        stem_sets(kb, keys, terms)) or stemmed[-1])
    fast = []
    for q in questions:
        statements.clear()
        d = engine.decide(kb, q)
        fast.append((d.retrieved.candidates, d.retrieved.context, d.signals, d.decision))
        assert sum(s.startswith("SELECT version FROM kbs") for s in statements) == 1
        assert not any(s.startswith("SELECT chunk_key") or " FROM chunks " in s
                       for s in statements), statements
    assert len(stemmed) == len(questions) and all(s is not None for s in stemmed)
    monkeypatch.setattr(store, "pinned", lambda kb: contextlib.nullcontext())
    monkeypatch.setattr(store, "_table", lambda kb: None)  # SQL chunks, the gate stems them
    slow = []
    for q in questions:
        statements.clear()
        d = engine.decide(kb, q)
        slow.append((d.retrieved.candidates, d.retrieved.context, d.signals, d.decision))
        assert sum(s.startswith("SELECT version FROM kbs") for s in statements) > 3
    assert fast == slow


def test_sentence_terms_read_only_chunks_that_can_beat_the_best_and_give_the_same(
        engine: Engine, monkeypatch: pytest.MonkeyPatch) -> None:
    """A chunk's share of the key terms bounds its sentences' (``evidence.sentence_terms``):
    skipping the chunks it rules out gives the value of reading every sentence."""

    kb = engine.open_kb("s", embedder="hashing:256")
    engine.ingest(kb, [SAMPLE])
    stemmed = {"bounded": 0, "every": 0}
    real = evidence._sentence_stems
    for q in load_queries(SAMPLE_QUERIES / "smoking-cessation.test.jsonl"):
        found = engine.retrieve(kb, q.query)
        units = evidence.context_sentences(found.context)
        pool = [evidence.chunk_stems(c.chunk) for c in found.candidates]
        values = {}
        for way, bound in (("bounded", lambda c: evidence.chunk_stems(c.chunk)), ("every", None)):
            def counted(*key: object, way: str = way) -> frozenset[str]:
                stemmed[way] += 1
                return real(*key)  # type: ignore[arg-type]

            monkeypatch.setattr(evidence, "_sentence_stems", counted)
            values[way] = evidence.sentence_terms(q.query, units, pool, bound)
        assert values["bounded"] == values["every"], q.query
    assert stemmed["bounded"] < 0.7 * stemmed["every"], stemmed
