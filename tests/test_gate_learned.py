"""Sentence-level evidence signals, the learned policy, and auto's out-of-fold comparison."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest

from citewise.answer import evidence, gate, learned, signals
from citewise.calibrate import calibration, crossval
from citewise.calibrate.calibration import Observation
from citewise.embedders import get_embedder
from citewise.errors import ConfigError
from citewise.records import Candidate, Chunk, Signals
from citewise.sentences import stem
from tests.helpers import hashing_config

pytestmark = pytest.mark.unit


def cand(text: str, doc: str = "d.md", dense: int = 0, bm25: int = 0, cos: float = 0.5,
         section: tuple[str, ...] = ("Notes",)) -> Candidate:
    return Candidate(Chunk(doc, 0, section, text, "Guide"), cos, dense_rank=dense, bm25_rank=bm25)


# -- evidence ---------------------------------------------------------------------------------


def test_key_terms_weigh_numbers_and_names_more() -> None:
    terms = evidence.key_terms("Is Champix safe at 2 mg for people with HIV?")
    assert terms["champix"] == terms["2"] == terms["hiv"] == evidence.ENTITY_WEIGHT
    assert terms[stem("safe")] == terms[stem("people")] == 1.0
    # a capital that starts a sentence is not a name
    assert evidence.key_terms("Dosing of varenicline. Nausea?")["nausea"] == 1.0


def test_sentence_terms_read_one_sentence_with_its_headings() -> None:
    pool = [cand("Varenicline is taken for 12 weeks. Nausea is common."),
            cand("Bupropion helps some people."), cand("Weight gain is common.")]
    units = evidence.context_sentences(pool[:1])
    assert [s for _, s in units] == ["Varenicline is taken for 12 weeks.", "Nausea is common."]
    stems = [evidence.chunk_stems(c.chunk) for c in pool]
    # both words are in the chunk, but in two sentences: the best sentence holds one of them
    whole = signals.coverage("varenicline nausea", pool[:1], pool)
    one = evidence.sentence_terms("varenicline nausea", units, stems)
    assert whole == pytest.approx(1.0) and 0.0 < one < 1.0
    idf = evidence.idf([stem("varenicline"), stem("nausea")], stems)
    assert one == pytest.approx(max(idf.values()) / sum(idf.values()))
    # a heading's words count for each of its sentences
    headed = [cand("It is taken for 12 weeks.", section=("Varenicline",))]
    assert evidence.sentence_terms("varenicline 12 weeks", evidence.context_sentences(headed),
                                   [evidence.chunk_stems(c.chunk) for c in headed]) == 1.0


def test_idf_counts_each_term_in_each_stem_set_once() -> None:
    rng = np.random.default_rng(3)
    words = [f"w{i}" for i in range(12)]
    for _ in range(50):
        pool = [frozenset(rng.choice(words, int(rng.integers(0, 8))).tolist())
                for _ in range(int(rng.integers(0, 30)))]
        terms = list(dict.fromkeys(rng.choice(words, int(rng.integers(1, 6))).tolist()))
        want = {t: math.log(1.0 + (len(pool) - sum(t in p for p in pool) + 0.5)
                            / (sum(t in p for p in pool) + 0.5)) for t in terms}
        assert evidence.idf(terms, pool) == want
        assert list(evidence.idf(terms, pool)) == terms  # in the terms' order: the same sums


def test_sentence_cosine_is_the_best_context_sentence() -> None:
    model = get_embedder("hashing:256")
    context = [cand("Varenicline is taken for 12 weeks. Nausea is common.")]
    q = model.embed(["Nausea is common."])[0]
    assert evidence.sentence_cosine(evidence.context_sentences(context), model, q) == pytest.approx(1.0)
    s = signals.measure(context, context, "Nausea is common.", model, q)
    assert s.sentence_cosine == pytest.approx(1.0)
    assert signals.measure(context, context, "Nausea").sentence_cosine == 0.0  # no vectors given


def test_agreement_is_the_overlap_of_the_two_top_fives() -> None:
    both = [cand(f"t{i}", f"{i}.md", dense=i + 1, bm25=i + 1) for i in range(5)]
    assert evidence.agreement(both) == 1.0
    dense_only = [cand(f"t{i}", f"{i}.md", dense=i + 1) for i in range(5)]
    keyword = [cand(f"k{i}", f"k{i}.md", bm25=i + 1) for i in range(3)]
    assert evidence.agreement(dense_only + keyword) == 0.0
    mixed = [cand("a", "a.md", dense=1, bm25=2), cand("b", "b.md", dense=2),
             cand("c", "c.md", bm25=1)]
    assert evidence.agreement(mixed) == pytest.approx(1 / 5)


def test_margin_is_top1_above_the_pool() -> None:
    s = Signals(0.8, 0.5, 8, pool=0.3)
    assert s.margin == pytest.approx(0.5) and gate.get_policy("margin").value(s) == pytest.approx(0.5)


# -- the learned policy -----------------------------------------------------------------------


def two_signal_set(n: int = 20, seed: int = 3) -> list[Observation]:
    """No single signal separates: thin questions have close sentences but retrievers that
    disagree, out-of-scope ones agreeing retrievers but no close sentence; covered both."""
    rng = np.random.default_rng(seed)
    out = []
    for bucket, cosine, agree in (("covered", 0.8, 0.8), ("thin", 0.8, 0.2), ("out_of_scope", 0.3, 0.8)):
        for i in range(n):
            s = Signals(0.6, 0.4, 8, 0.5, 0.3, 0.5, cosine + rng.normal(0, 0.05), agree + rng.normal(0, 0.05))
            out.append(Observation(f"{bucket}{i}", bucket, "answer" if bucket == "covered" else "refuse", s))
    return out


def test_learned_fits_a_readable_model_and_round_trips() -> None:
    observations = two_signal_set()
    model = learned.fit([o.signals for o in observations], [o.expect == "answer" for o in observations])
    coef = dict(zip(model.features, model.coef, strict=True))
    assert coef["sentence_cosine"] > 0 and coef["agreement"] > 0
    p = model.values([o.signals for o in observations])
    assert ((p >= 0) & (p <= 1)).all()
    assert (p[:20].min() > p[20:].max())  # covered above every other question
    again = learned.LearnedModel.from_dict(model.as_dict())
    first = observations[0].signals
    assert again.value(first) == pytest.approx(model.value(first), abs=1e-5)
    with pytest.raises(ConfigError, match="malformed"):
        learned.LearnedModel.from_dict({"features": ["top1"]})
    with pytest.raises(ConfigError, match="signals"):
        learned.LearnedModel.from_dict({**model.as_dict(), "features": ["colour"] * 7})
    with pytest.raises(ConfigError, match="needs a fitted model"):
        gate.ThresholdGate("learned", 0.5)


def test_auto_chooses_learned_when_it_wins_out_of_fold(store) -> None:
    observations = two_signal_set()
    result = calibration.calibrate(observations, "auto", 0.05)
    assert result.folds == 5 and result.chosen.policy == "learned"
    chosen = result.chosen
    assert chosen.balance == max(p.balance for p in result.compared)
    assert [r.refused for r in chosen.out_of_fold] == [0, 20, 20]
    # stored with its model; the knowledge base's gate decides with it
    config = hashing_config()
    store.create_kb("s", config)
    kb = store.update_kb("s", replace(config, gate=calibration.setting_for(config, result)))
    used, warnings = gate.gate_for(kb.config)
    assert used.policy == "learned" and warnings == []
    decisions = [used.decide(o.signals).answer for o in observations]
    assert decisions == [o.expect == "answer" for o in observations]
    # another embedder: the default policy, not a model fitted on other vectors
    assert gate.default_setting(replace(kb.config, embedder="hashing:128")).policy == "top1"


def test_learned_is_not_chosen_when_it_cannot_be_cross_validated() -> None:
    observations = two_signal_set(n=1)  # one question per bucket: no folds
    result = calibration.calibrate(observations, "auto", 0.05)
    assert result.folds == 0 and result.chosen.policy != "learned"
    assert all(p.out_of_fold is None for p in result.compared)
    alone = calibration.calibrate(observations, "learned", 0.05)
    assert alone.chosen.policy == "learned" and alone.chosen.model is not None


def test_folds_are_stratified_and_fixed() -> None:
    buckets = ["covered"] * 10 + ["thin"] * 5 + ["out_of_scope"] * 5
    fold = crossval.folds(buckets, 5)
    assert (fold == crossval.folds(buckets, 5)).all()
    for b in ("covered", "thin", "out_of_scope"):
        mine = fold[[x == b for x in buckets]]
        assert np.bincount(mine, minlength=5).max() - np.bincount(mine, minlength=5).min() <= 1
    assert crossval.usable_folds([40, 1]) == 1 and crossval.usable_folds([40, 40]) == 5
    seen = crossval.out_of_fold(fold, lambda train, test: np.array([len(set(train) & set(test))] * len(test)))
    assert (seen == 0).all()


def test_signal_aucs_compare_covered_with_each_bucket() -> None:
    observations = two_signal_set()
    table = {s.signal: s for s in calibration.signal_aucs(observations)}
    assert set(table) == {name for name, *_ in gate.SIGNALS}
    assert table["sentence_cosine"].out_of_scope == 1.0 and table["sentence_cosine"].thin < 0.8
    assert table["agreement"].thin == 1.0 and table["agreement"].out_of_scope < 0.8
    assert math.isclose(table["top1"].thin, 0.5)  # every top1 equal: ties count half


def test_ask_reads_the_context_sentence_vectors_once(engine) -> None:
    from tests.helpers import SAMPLE

    kb = engine.open_kb("s", embedder="hashing:256")
    engine.ingest(kb, [SAMPLE])
    kb = calibration.open_gate(kb)  # every question reaches the generator
    reads = []
    real = engine.store.sentence_vectors
    engine.store.sentence_vectors = lambda *a, **k: reads.append(1) or real(*a, **k)
    result = engine.ask(kb, "How long do nicotine withdrawal symptoms last?", log=False)
    assert result.decision.answer and reads == [1]  # read for the gate, reused to answer
    decided = engine.decide(kb, "How long do nicotine withdrawal symptoms last?")
    assert decided.signals.sentence_cosine > 0 and decided.decision == result.decision
