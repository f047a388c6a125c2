"""The ``kb_terms`` signal (key terms no chunk of the knowledge base holds) and ``grounded:W``."""

from __future__ import annotations

import math

import pytest

from citewise.answer import absent, evidence, gate, signals
from citewise.errors import ConfigError
from citewise.records import Candidate, Chunk, Signals
from citewise.sentences import stem

pytestmark = pytest.mark.unit


def cand(text: str) -> Candidate:
    return Candidate(Chunk("d.md", 0, ("Notes",), text, "Guide"), 0.5, dense_rank=1)


def test_terms_drop_contractions_of_function_words_and_read_possessives_as_words() -> None:
    found = absent.terms("What's the WHO's view? I'm sure it won't matter to the patient's GP")
    assert set(found) == {stem(w) for w in ("view", "sure", "matter", "patient", "gp")}
    assert found[stem("patient")] == ["patient"]
    assert absent.words("Does cytisine work, quitting?") == ["cytisine", "work", "quitting"]


def test_a_question_typed_loosely_asks_the_store_for_the_words_the_documents_use() -> None:
    # "21mg" is "21 mg" and "ive", "isnt" are stop words: none of them is a key term the
    # knowledge base could lack, so a covered question typed this way keeps kb_terms at 1
    question = "ive been on the 21mg patch, isnt it time for 14mg"
    asked = absent.words(question)
    assert sorted(asked) == sorted({"21", "21mg", "mg", "patch", "time", "14", "14mg"})
    assert absent.terms(question)["mg"] == ["mg", "21mg", "14mg"]
    pool = [frozenset({stem("patch"), "21", "mg", "14"})]
    spaced = {"21": 3, "mg": 5, "patch": 4, "time": 2, "14": 1}  # the documents say "21 mg"
    assert absent.kb_terms(question, spaced, pool) == 1.0
    joined = {"21mg": 3, "patch": 4, "time": 2, "14mg": 1}  # they say "21mg"
    assert absent.kb_terms(question, joined, pool) == 1.0
    assert absent.kb_terms(question, {"patch": 4, "time": 2}, pool) < 0.5


def test_an_absent_rare_term_outweighs_the_common_ones_held() -> None:
    pool = [frozenset({stem("smoking"), stem("quitting")})] * 9 + [frozenset({stem("work")})]
    question = "Does cytisine work for quitting smoking?"
    held = {"cytisine": 0, "work": 3, "quitting": 40, "smoking": 50}
    share = absent.kb_terms(question, held, pool)
    weights = evidence.idf([stem(w) for w in held], pool)
    assert share == pytest.approx(1.0 - weights[stem("cytisine")] / sum(weights.values()))
    assert share < 0.5  # one word of four, but the rarest: more than half the weight
    # the knowledge base holds it somewhere, if not among the candidates: nothing is missing
    assert absent.kb_terms(question, {**held, "cytisine": 1}, pool) == 1.0
    assert absent.kb_terms(question, {}, pool) == 0.0  # nothing held at all
    assert absent.kb_terms("is it?", {}, pool) == 1.0  # no key terms: nothing can be missing


def test_a_name_weighs_entity_weight_times_its_idf() -> None:
    pool = [frozenset({stem("smoking")})] * 4
    share = absent.kb_terms("Is Champix safe?", {"champix": 0, "safe": 1}, pool)
    # neither word is in the pool, so both have the same IDF; the name weighs double
    w = evidence.ENTITY_WEIGHT
    assert share == pytest.approx(1.0 / (1.0 + w))


def test_signals_read_kb_terms_only_when_the_counts_are_given() -> None:
    context = [cand("Varenicline is taken for 12 weeks.")]
    assert signals.measure(context, context, "Does cytisine work?").kb_terms == 1.0
    s = signals.measure(context, context, "Does cytisine work?", held={"cytisine": 0, "work": 2})
    assert s.kb_terms == pytest.approx(0.5)  # neither word is in the pool: equal weights


def test_grounded_penalises_the_share_of_key_terms_no_chunk_holds() -> None:
    s = Signals(0.6, 0.4, 8, sentence_cosine=0.65, kb_terms=0.3)
    assert gate.get_policy("grounded").spec == "grounded:0.25"
    assert gate.get_policy("grounded:0.5").value(s) == pytest.approx(0.65 - 0.5 * 0.7)
    assert gate.get_policy("kb_terms").value(s) == 0.3
    # a question with every key term held reads as the best sentence's cosine
    assert gate.get_policy("grounded:1").value(Signals(0.6, 0.4, 8, sentence_cosine=0.7)) == 0.7
    with pytest.raises(ConfigError, match="weight"):
        gate.get_policy("grounded:x")
    with pytest.raises(ConfigError, match="weight"):
        gate.get_policy("grounded:0")
    the_gate = gate.ThresholdGate("grounded:0.25", 0.5)
    assert the_gate.decide(Signals(0.6, 0.4, 8, sentence_cosine=0.65)).answer
    refused = the_gate.decide(s)
    assert not refused.answer and math.isclose(refused.signal, 0.65 - 0.25 * 0.7)


def test_decide_asks_the_store_whether_any_chunk_holds_each_word(engine) -> None:
    from tests.helpers import SAMPLE

    kb = engine.open_kb("s", embedder="hashing:256")
    engine.ingest(kb, [SAMPLE])
    asked = []
    real = engine.store.term_counts
    engine.store.term_counts = lambda kb, terms, cap: asked.append((terms, cap)) or real(kb, terms, cap)
    held = engine.decide(kb, "How long does varenicline treatment last?").signals
    assert held.kb_terms == 1.0
    assert (["long", "varenicline", "treatment", "last"], 1) in asked
    lacking = engine.decide(kb, "Does cytisine work for quitting smoking?").signals
    assert 0.0 < lacking.kb_terms < 0.6  # "cytisine" is in no chunk of the sample collection
