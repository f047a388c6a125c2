import pytest

from citewise.answer import citations
from citewise.answer.gate import ThresholdGate, gate_for
from citewise.answer.signals import measure as signals
from citewise.kb import GateSetting, Retrieval
from citewise.records import Candidate, Chunk, Signals
from tests.helpers import hashing_config


def cand(text: str, cosine: float = 0.5, doc: str = "d.md") -> Candidate:
    return Candidate(Chunk(doc, 0, ("Dosing",), text, "Guide"), cosine)


def test_signals_are_raw_cosines() -> None:
    context = [cand("a", 0.6), cand("b", 0.2)]
    s = signals(context, [*context, cand("c", 0.7)], "a question")
    assert (s.top1, s.mean, s.n_context) == (0.7, pytest.approx(0.4), 2)


def test_threshold_gate_policies() -> None:
    s = Signals(top1=0.5, mean=0.3, n_context=3)
    assert ThresholdGate("top1", 0.45).decide(s).answer
    refused = ThresholdGate("mean", 0.35).decide(s)
    assert not refused.answer and "0.300 is below the threshold 0.350" in refused.reason
    assert not ThresholdGate("top1", 0.1).decide(Signals(0.9, 0.9, 0)).answer


def test_stored_threshold_is_dropped_when_the_embedder_or_retrieval_changes() -> None:
    config = hashing_config()
    tuned = GateSetting("mean", 0.33, config.embedder, config.fingerprint(), "calibrated")
    gate, warnings = gate_for(hashing_config(gate=tuned))
    assert (gate.policy, gate.threshold, warnings) == ("mean", 0.33, [])
    changed = hashing_config(gate=tuned, retrieval=Retrieval(context_k=4))
    gate, warnings = gate_for(changed)
    assert gate.threshold != 0.33 and "uncalibrated" in warnings[0]


CTX = [
    cand("Symptoms persist for 4 weeks in most smokers."),
    cand("Varenicline is taken at 0.5 mg once daily on days 1 to 3."),
]


@pytest.mark.parametrize(
    ("draft", "kept", "reason"),
    [
        ("Varenicline is taken at 0.5 mg once daily on days 1 to 3 [2].", 1, ""),
        ("Varenicline is taken at 1 mg once daily on days 1 to 3 [2].", 0, "1 mg does not match"),
        ("Varenicline is taken at 0.5 g once daily on days 1 to 3 [2].", 0, "units"),
        ("Varenicline is not taken at 0.5 mg once daily on days 1 to 3 [2].", 0, "negates"),
        ("Varenicline is taken at 0.5 mg once daily on days 1 to 3.", 0, "cites no passage"),
        ("Varenicline is taken at 0.5 mg once daily on days 1 to 3 [9].", 0, "does not exist"),
        ("Bupropion helps people sleep better at night [1].", 0, "content words"),
    ],
)
def test_citation_check_verdicts(draft: str, kept: int, reason: str) -> None:
    checked = citations.check(draft, CTX)
    assert len(checked.kept) == kept
    if reason:
        assert reason in checked.dropped[0].reason


def test_citations_renumbered_and_precision() -> None:
    checked = citations.check(
        "Symptoms persist for 4 weeks [1]. Varenicline is taken at 0.5 mg once daily [2]. "
        "Symptoms subside within 2 weeks [1].",
        CTX,
    )
    assert checked.text == (
        "Symptoms persist for 4 weeks [1]. Varenicline is taken at 0.5 mg once daily [2]."
    )
    assert [(c.n, c.quote) for c in checked.citations] == [(1, CTX[0].chunk.text), (2, CTX[1].chunk.text)]
    assert checked.precision == pytest.approx(2 / 3)


def test_markers_after_the_period_stay_with_their_sentence() -> None:
    assert citations.parse("One claim. [1] Two claims [2, 3]. Three.") == [
        ("One claim.", (1,)), ("Two claims.", (2, 3)), ("Three.", ()),
    ]
