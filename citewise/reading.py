"""The context read by the reader (``citewise/reader``): which units answer the question, and
whether a cited passage supports, contradicts or does not address a drafted sentence.

The reader reads a question with one unit (a sentence, a list item, a table row with its
header) as it stands, without its heading: read after "Warranty:", "Keep your receipt." looked
to it like an answer to "How long is the warranty?" (0.999, against 0.075 without), since its
training passages never carried headings. It is used in three places:

- the gate's ``answerable`` signal (``Signals.answerable``): the highest P(answers) among the
  ``READ_UNITS`` context units closest to the question by cosine (``unit_readings``);
- the extractive answer (``generators/extractive.py``): the units that answer, in their order;
- the citation check (``citations.Checker``): ``verdict`` of a drafted sentence against the
  units of the passage it cites.

Readings are remembered by the reader, so the answer and the check do not read again what the
gate read.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from .reader import ANSWERS, CONTRADICTS, Reader
from .records import Candidate, Chunk
from .sentences import split_sentences

READ_UNITS = 12  # the context units the gate reads, closest to the question first
WINDOW_WORDS = 45  # a window of a passage, as the reader was trained on them
RERANK_WINDOWS = 3  # the windows of a passage read to rerank it
# a drafted sentence is supported when its best unit's P(answers) reaches SUPPORTED_AT, and
# contradicted when a unit's P(contradicts) reaches CONTRADICTED_AT and beats its P(answers);
# chosen on SciFact's held-out train claims (benchmarks/citations.py --reader)
SUPPORTED_AT = 0.5
CONTRADICTED_AT = 0.5


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
class Verdict:
    """What the reader says of a sentence against a passage: the best unit's P(answers), the
    highest P(contradicts), the unit that supports (or contradicts) it, and the verdict."""

    answers: float
    contradicts: float
    unit: str
    said: str  # "supported", "contradicted" or "not addressed"

    @property
    def reason(self) -> str:
        if self.said == "contradicted":
            return (f"the passage contradicts it (the reader: {self.contradicts:.2f} that "
                    f"{_short(self.unit)!r} contradicts it)")
        if self.said == "not addressed":
            return (f"the passage does not say it (the reader: at most {self.answers:.2f} that a "
                    f"sentence of the passage supports it, below {SUPPORTED_AT:.2f})")
        return ""


def verdict(reader: Reader, sentence: str, units: Sequence[str]) -> Verdict:
    """Whether the passage whose units are ``units`` supports, contradicts or does not address
    ``sentence``."""
    if not units:
        return Verdict(0.0, 0.0, "", "not addressed")
    folded = " ".join(sentence.split())
    quoted = next((u for u in units if " ".join(u.split()) == folded), None)
    if quoted is not None:  # a quote of the passage: what it says, whatever the reader reads
        return Verdict(1.0, 0.0, quoted, "supported")
    probs = reader.read([(sentence, u) for u in units])
    best, worst = int(np.argmax(probs[:, ANSWERS])), int(np.argmax(probs[:, CONTRADICTS]))
    answers, contradicts = float(probs[best, ANSWERS]), float(probs[worst, CONTRADICTS])
    if contradicts >= CONTRADICTED_AT and contradicts > answers:
        return Verdict(answers, contradicts, units[worst], "contradicted")
    if answers >= SUPPORTED_AT:
        return Verdict(answers, contradicts, units[best], "supported")
    return Verdict(answers, contradicts, units[best], "not addressed")


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
