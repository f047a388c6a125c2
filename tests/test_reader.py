"""The shipped reader: its weights as checked and built, what it reads, and its three uses in
``ask`` (the gate, the extractive answer, the citation check) with the refusal text."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from citewise import kb_settings
from citewise.answer import citations, gate
from citewise.engine import Engine
from citewise.errors import EmbedderError
from citewise.reader import ANSWERS, CONTRADICTS, HERE, NEITHER, Reader, get_reader, reading
from citewise.records import Candidate, Chunk, Refusal

pytestmark = pytest.mark.model


@pytest.fixture(scope="module")
def reader() -> Reader:
    found = get_reader("citewise-reader")
    assert found is not None
    return found


def test_the_shipped_weights_reproduce_their_recorded_outputs(tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CITEWISE_CACHE", str(tmp_path / "cache"))  # built here, from nothing
    fresh = Reader()
    probes = json.loads((HERE / "probes.json").read_text())["pairs"]
    probs = fresh.read([(p["first"], p["second"]) for p in probes])
    expected = np.array([p["probs"] for p in probes])
    assert np.abs(probs - expected).max() <= 1e-4  # recorded in torch, rounded to 4 places
    assert list((tmp_path / "cache" / "onnx").glob("citewise-reader-*.onnx"))
    # a second process finds the checked graph in the cache and builds nothing
    again = Reader()
    assert isinstance(again._source, Path) and np.allclose(again.read([(probes[0]["first"],
                                                                         probes[0]["second"])]), probs[:1])


def test_weights_that_are_not_the_shipped_ones_are_refused(tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CITEWISE_CACHE", str(tmp_path / "cache"))
    folder = tmp_path / "reader"
    shutil.copytree(HERE, folder, ignore=shutil.ignore_patterns("*.py", "__pycache__"))
    weights = folder / "reader.safetensors"
    raw = bytearray(weights.read_bytes())
    raw[-100] ^= 0xFF
    weights.write_bytes(bytes(raw))
    with pytest.raises(EmbedderError, match="sha256 .* corrupt or replaced"):
        Reader(folder).read([("q", "p")])
    weights.unlink()
    with pytest.raises(EmbedderError, match="missing"):
        Reader(folder).read([("q", "p")])


def test_it_reads_answers_contradictions_and_neither(reader: Reader) -> None:
    probs = reader.read([
        ("When does the library close on Saturdays?",
         "Opening hours: on Saturdays the library is open from 9 am to 1 pm."),
        ("Aspirin lowers the risk of a second heart attack.",
         "In the trial, aspirin did not lower the risk of a second heart attack."),
        ("When does the library close on Saturdays?",
         "Members may borrow up to ten books at a time."),
    ])
    assert probs.shape == (3, 3) and np.allclose(probs.sum(1), 1.0, atol=1e-5)
    assert probs[0].argmax() == ANSWERS
    assert probs[1].argmax() == CONTRADICTS
    assert probs[2].argmax() == NEITHER


MANUAL = """# X200 cordless vacuum

## Warranty

The X200 is covered for parts and labour when used as described in this manual.
The X200 warranty lasts 24 months from the date of purchase.
Keep your receipt: it is your proof of purchase.

## Charging

Charge the battery for four hours before first use.
The X200 runs for 40 minutes on a full charge in normal mode.

## Cleaning the filter

Rinse the filter under cold water once a month and let it dry for 24 hours.
Never use soap or a dishwasher on the filter.
"""


@pytest.fixture(scope="module")
def manual(tmp_path_factory: pytest.TempPathFactory) -> tuple[Engine, object]:
    from citewise.stores.sqlite import open_sqlite

    folder = tmp_path_factory.mktemp("manual")
    (folder / "x200.md").write_text(MANUAL)
    engine = Engine(open_sqlite(folder / "kb.db"))
    kb = engine.open_kb("manual")
    engine.ingest(kb, [folder / "x200.md"])
    # the gate on the reader's signal (the shipped default reads sentence cosines)
    change = kb_settings.apply("manual", kb.config, {"gate_policy": "read:0.25"})
    return engine, engine.store.update_kb("manual", change.config)


def test_the_gate_answers_what_a_unit_answers_and_refuses_what_none_does(manual) -> None:  # noqa: ANN001
    engine, kb = manual
    covered = engine.decide(kb, "How long is the warranty?")
    assert covered.signals.answerable > 0.5 and covered.decision.answer
    assert covered.closest is not None and "24 months" in covered.closest.unit
    thin = engine.decide(kb, "Does the warranty cover water damage?")
    assert thin.signals.answerable < covered.signals.answerable
    assert not thin.decision.answer


def test_a_refusal_names_the_closest_passage_only_when_something_is_close(manual) -> None:  # noqa: ANN001
    engine, kb = manual
    floor = gate.gate_for(kb.config)[0].related_floor
    thin = "Can I extend the warranty to five years?"
    decided = engine.decide(kb, thin)
    result = engine.ask(kb, thin, log=False)
    assert isinstance(result, Refusal) and decided.closest is not None
    # named: it shares "warranty" with the question, though its passage's cosine is below the
    # related-topics floor (a short passage's cosine is low)
    assert decided.closest.candidate.cosine < floor and "warranty" in decided.closest.unit
    assert "The closest passage, in “Warranty”" in result.reason
    assert "Nothing in it comes close" not in result.reason
    away = engine.ask(kb, "Who won the football world cup in 1998?", log=False)
    assert isinstance(away, Refusal) and "closest passage" not in away.reason
    assert "Nothing in it comes close" in away.reason


def test_the_check_keeps_what_the_passage_says_and_the_reader_reads_contradictions(
        reader: Reader) -> None:
    chunk = Chunk("x200.md", 0, ("Care",),
                  "The X200 is covered for parts and labour. The brush bar is safe to wash in "
                  "warm water.", "X200 cordless vacuum")
    read = citations.Checker([Candidate(chunk, 0.7, dense_rank=1)], reader=reader)
    assert read.sentence("The brush bar is safe to wash in warm water.", (1,)).supported
    assert read.sentence("The X200's brush bar can be washed in warm water.", (1,)).supported
    units = ["The X200 is covered for parts and labour.", "The brush bar is safe to wash in warm water."]
    against = reading.contradiction(reader, "The brush bar is not safe to wash.", units)
    assert against is not None and against.unit == units[1]
