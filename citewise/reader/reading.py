"""The context read by the reader (``citewise/reader``): which context units answer the
question, which passages have something to say about it, and whether a cited passage
contradicts a drafted sentence.

The reader reads a question with one unit (a sentence, a list item, a table row with its
header) as it stands, without its heading: read after "Warranty:", "Keep your receipt." looked
to it like an answer to "How long is the warranty?" (0.999, against 0.075 without), since its
training passages never carried headings. It is used for:

- the gate's ``answerable`` signal (``Signals.answerable``): the highest P(answers) among the
  ``READ_UNITS`` context units closest to the question by cosine (``unit_readings``), and the
  unit a refusal names (``closest``);
- the citation check (``citations.Checker``): a sentence the support score keeps is still
  rejected when the reader reads its cited passage as contradicting it (``contradiction``).
  The reader alone was a worse check than the score on SciFact (recall 0.48 against 0.66 at
  the same precision, ``benchmarks/citations.py --reader``); as a veto it raises precision;
- reranking (``Retrieval.rerank``, off by default): ``relevance`` of each passage.

Readings are remembered by the reader, so nothing is read twice for one question.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from citewise.reader import ANSWERS, CONTRADICTS, Reader
from citewise.records import Candidate, Chunk
from citewise.sentences import split_sentences

READ_UNITS = 12  # the context units read for the gate's signal, closest to the question first
NAMED_UNITS = 4  # the units read to name the closest passage of a refusal
WINDOW_WORDS = 45  # a window of a passage, as the reader was trained on them
RERANK_WINDOWS = 3  # the windows of a passage read to rerank it
# the check rejects a sentence the reader reads as contradicted by its cited passage at this
# probability; chosen on the 15% of SciFact train claims the reader never saw
# (``python -m benchmarks.citations --reader``: 0.9 of 0.05-0.95, for balanced accuracy)
CONTRADICTED_AT = 0.9


def unit_readings(reader: Reader, question: str, units: Sequence[tuple[Candidate, str]],
                  cosines: np.ndarray | None = None, limit: int = READ_UNITS) -> np.ndarray:
    """P(answers) per unit (0 for a unit not read): the ``limit`` units with the highest
    ``cosines`` (in the order given when there are none) are read."""
    out = np.zeros(len(units), dtype=np.float32)
    if not units:
        return out
    order = (np.argsort(-np.asarray(cosines), kind="stable") if cosines is not None
             else np.arange(len(units)))[:limit]
    probs = reader.read([(question, units[i][1]) for i in order])
    out[order] = probs[:, ANSWERS]
    return out


NAMED_AT = 0.05  # a refusal names the unit the reader read closest to answering from here


@dataclass(frozen=True)
class Closest:
    """The context unit the reader read as closest to answering, and its P(answers)."""

    candidate: Candidate
    unit: str
    answers: float


def closest(units: Sequence[tuple[Candidate, str]], answers: np.ndarray) -> Closest | None:
    """The unit with the highest P(answers), when it reaches ``NAMED_AT``."""
    if not len(answers) or float(answers.max()) < NAMED_AT:
        return None
    i = int(np.argmax(answers))
    return Closest(units[i][0], units[i][1], float(answers[i]))


@dataclass(frozen=True)
class Contradiction:
    """A unit of the cited passage that the reader reads as contradicting a sentence."""

    unit: str
    contradicts: float

    @property
    def reason(self) -> str:
        return (f"the passage contradicts it (the reader: {self.contradicts:.2f} that "
                f"{_short(self.unit)!r} says otherwise)")


def contradiction(reader: Reader, sentence: str, units: Sequence[str]) -> Contradiction | None:
    """The unit that contradicts ``sentence`` when the reader's highest P(contradicts) over
    ``units`` reaches ``CONTRADICTED_AT`` and beats its highest P(answers); None otherwise,
    and for a sentence that quotes one of the units."""
    folded = " ".join(sentence.split())
    if not units or any(" ".join(u.split()) == folded for u in units):
        return None
    probs = reader.read([(sentence, u) for u in units])
    worst = int(np.argmax(probs[:, CONTRADICTS]))
    contradicts = float(probs[worst, CONTRADICTS])
    if contradicts >= CONTRADICTED_AT and contradicts > float(probs[:, ANSWERS].max()):
        return Contradiction(units[worst], contradicts)
    return None


def windows(text: str, words: int = WINDOW_WORDS) -> list[str]:
    """The text cut into runs of whole sentences of at most ``words`` words each (a longer
    sentence is cut at ``words``)."""
    out: list[str] = []
    current: list[str] = []
    for sentence in split_sentences(" ".join(text.split())):
        tokens = sentence.split()
        if current and len(current) + len(tokens) > words:
            out.append(" ".join(current))
            current = []
        current.extend(tokens[: words - len(current)] if len(tokens) > words else tokens)
    if current:
        out.append(" ".join(current))
    return out


def relevance(reader: Reader, question: str, chunks: Sequence[Chunk]) -> np.ndarray:
    """How much each passage has to say about the question, for reranking: the highest
    P(answers) + P(contradicts) among its first ``RERANK_WINDOWS`` windows."""
    pairs, owner = [], []
    for i, chunk in enumerate(chunks):
        for window in windows(chunk.text)[:RERANK_WINDOWS] or [chunk.text]:
            pairs.append((question, window))
            owner.append(i)
    out = np.zeros(len(chunks), dtype=np.float32)
    if pairs:
        probs = reader.read(pairs)
        np.maximum.at(out, np.array(owner), probs[:, ANSWERS] + probs[:, CONTRADICTS])
    return out


def _short(text: str, words: int = 12) -> str:
    ws = text.split()
    return " ".join(ws[:words]) + (" …" if len(ws) > words else "")
