"""The rules around the reader, without running it: the policies that read, the knowledge base's
``reader`` setting, the refusal text, and the verdict's quote rule (``reading.py``)."""

from __future__ import annotations

import numpy as np
import pytest

from citewise import kb_settings
from citewise.answer import gate, learned, plain
from citewise.calibrate import calibration
from citewise.calibrate.thresholds import Observation
from citewise.errors import ConfigError, QueryError
from citewise.kb import KBConfig
from citewise.reader import reading
from citewise.records import Candidate, Chunk, Signals

pytestmark = pytest.mark.unit
LOCAL = "local:all-MiniLM-L6-v2"


class Scripted:
    """A reader that answers from a table (P(answers), P(contradicts)) by passage, 0 else."""

    def __init__(self, said: dict[str, tuple[float, float]]) -> None:
        self.said, self.asked = said, []

    def read(self, pairs):  # noqa: ANN001, ANN201
        self.asked.extend(pairs)
        rows = []
        for _, passage in pairs:
            a, c = next((v for k, v in self.said.items() if k in passage), (0.0, 0.0))
            rows.append([1.0 - a - c, a, c])
        return np.array(rows, dtype=np.float32)


def cand(text: str, section: tuple[str, ...] = ("Warranty",), cosine: float = 0.6) -> Candidate:
    return Candidate(Chunk("manual.pdf", 0, section, text, "X200 manual"), cosine, dense_rank=1)


def test_read_policies_parse_and_weigh_the_absence_penalty() -> None:
    rule = gate.get_policy("read:0.5")
    assert rule.spec == "read:0.5" and gate.get_policy("read").spec == "read:0.25"
    assert rule.value(Signals(0.5, 0.5, 3, kb_terms=0.5, answerable=0.9)) == pytest.approx(0.65)
    assert gate.get_policy("answerable").value(Signals(0.5, 0.5, 3, answerable=0.7)) == pytest.approx(0.7)
    with pytest.raises(ConfigError):
        gate.get_policy("read:9")
    assert gate.reads("read:1") and gate.reads("answerable") and not gate.reads("grounded:0.25")


def test_the_reader_is_on_by_default_for_the_local_model_only() -> None:
    assert KBConfig(LOCAL, 384).reads == "citewise-reader"
    assert KBConfig("hashing:64", 64).reads == "none"
    assert KBConfig(LOCAL, 384, reader="none").reads == "none"
    # "auto" leaves the fingerprint as it was, so thresholds calibrated before still hold
    assert KBConfig(LOCAL, 384).fingerprint() != KBConfig(LOCAL, 384, reader="none").fingerprint()
    assert KBConfig.from_json(KBConfig(LOCAL, 384).to_json()).reader == "auto"


def test_without_the_reader_the_default_policy_is_one_that_does_not_read() -> None:
    config = KBConfig(LOCAL, 384, reader="none")
    assert not gate.reads(gate.default_setting(config).policy)
    assert not gate.reads(gate.default_setting(config, "read:0.25").policy)


def test_a_stored_reading_policy_is_not_used_once_the_reader_is_off() -> None:
    on = KBConfig(LOCAL, 384)
    setting = gate.default_setting(on, "read:0.25")
    off = KBConfig(LOCAL, 384, reader="none", gate=setting)
    the_gate, warnings = gate.gate_for(off)
    assert not gate.reads(the_gate.policy)
    assert any("reader" in w for w in warnings)


def test_kb_set_reader_is_checked_and_changes_the_config() -> None:
    assert kb_settings.check_value("reader", " none ") == "none"
    with pytest.raises(ConfigError, match="reader takes one of"):
        kb_settings.check_value("reader", "bert")
    change = kb_settings.apply("kb", KBConfig(LOCAL, 384), {"reader": "none"})
    assert change.config.reader == "none" and change.changed == {"reader": ("auto", "none")}


def observation(i: int, bucket: str, answerable: float) -> Observation:
    return Observation(f"q{i}", bucket, "answer" if bucket == "covered" else "refuse",
                       Signals(0.5, 0.5, 3, answerable=answerable))


def test_calibration_leaves_reading_policies_out_without_the_reader() -> None:
    unread = [observation(i, "covered" if i % 2 else "thin", 0.0) for i in range(20)]
    with pytest.raises(QueryError, match="needs the reader"):
        calibration.calibrate(unread, "read:0.25")
    compared = {p.policy for p in calibration.calibrate(unread, "auto").compared}
    assert not any(gate.reads(p) for p in compared)
    model = learned.fit([o.signals for o in unread], [o.bucket == "covered" for o in unread])
    assert "answerable" not in model.features


def test_the_reader_vetoes_only_a_clear_contradiction_and_never_a_quote() -> None:
    units = ["Warranty lasts 24 months.", "Keep your receipt."]
    quoted = Scripted({"24 months": (0.0, 1.0)})
    assert reading.contradiction(quoted, "Warranty  lasts 24 months.", units) is None
    assert not quoted.asked  # a quote of the passage is what it says: nothing is read
    against = reading.contradiction(Scripted({"24 months": (0.02, 0.95)}), "It lasts 12 months.", units)
    assert against is not None and against.unit == units[0] and "contradicts it" in against.reason
    assert reading.contradiction(Scripted({"24 months": (0.1, 0.8)}), "It lasts 12 months.", units) is None
    # a unit that supports it more than any contradicts: no veto
    assert reading.contradiction(Scripted({"24 months": (0.02, 0.95), "receipt": (0.97, 0.0)}),
                                 "It lasts 12 months.", units) is None


def test_the_gate_reads_the_units_closest_to_the_question_first() -> None:
    units = [(cand("a"), f"unit {i}") for i in range(20)]
    cosines = np.arange(20, dtype=np.float32)  # the last unit is the closest
    reader = Scripted({"unit 19": (0.9, 0.0)})
    answers = reading.unit_readings(reader, "q", units, cosines, limit=3)
    assert len(reader.asked) == 3 and answers[19] == pytest.approx(0.9) and answers[:17].max() == 0
    near = reading.closest(units, answers)
    assert near is not None and near.unit == "unit 19"
    assert reading.closest(units, np.zeros(20)) is None


def test_a_refusal_says_nothing_comes_close_only_when_nothing_does() -> None:
    nothing = plain.refusal(plain.NOT_COVERED, ())
    assert "Nothing in it comes close" in nothing
    named = plain.closest_passage("Warranty", "The X200 is covered for parts and labour.")
    near = plain.refusal(plain.NOT_COVERED, (), named)
    assert "Nothing in it comes close" not in near
    assert "“Warranty”" in near and "covered for parts and labour" in near
    both = plain.refusal(plain.NOT_COVERED, ("X200 manual › Warranty",), named)
    assert both.index("closest passage") < both.index("closest topics")


def test_the_check_asks_the_reader_only_about_what_the_score_kept() -> None:
    from citewise.answer import citations

    chunk = Chunk("d.md", 0, ("Care",), "The brush bar is safe to wash in warm water. Dry it well.", "X")
    reader = Scripted({"warm water": (0.01, 0.97)})
    checker = citations.Checker([Candidate(chunk, 0.7, dense_rank=1)], reader=reader)
    vetoed = checker.sentence("The brush bar is safe to wash in warm water today.", (1,))
    assert not vetoed.supported and "contradicts it" in vetoed.reason
    asked = len(reader.asked)
    assert not checker.sentence("Bicycles need new tyres every spring.", (1,)).supported
    assert len(reader.asked) == asked  # dropped by the score: nothing more read

