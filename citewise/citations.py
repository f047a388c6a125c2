"""The citation contract, checked after generation for every answer.

A draft is split into sentences; each sentence that states something must cite ``[n]``
passages that exist, and every cited passage must support it: enough of the sentence's
content words appear in the passage (``lexical_support``), and every number in the sentence
appears in the passage with the same unit next to it, and a negation in one is in the other.
Unsupported sentences are dropped and reported; citations are renumbered in order of use.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from .records import Candidate, Citation
from .sentences import split_sentences, stems

MARKER = re.compile(r"\s*\[(\d+(?:\s*,\s*\d+)*)\]")
TRAILING_MARKERS = re.compile(r"([.!?])((?:\s*\[\d+(?:\s*,\s*\d+)*\])+)")
NUMBER = re.compile(r"(?<![\w.])(\d+(?:[.,]\d+)?)\s*(%|[a-zA-Zµ]+)?")
NEGATIONS = frozenset({"not", "no", "never", "without", "none", "neither", "nor", "cannot"})
MIN_LEXICAL_SUPPORT = 0.6


@dataclass(frozen=True)
class CheckedSentence:
    text: str  # without markers
    cited: tuple[int, ...]  # passage numbers as the draft gave them
    supported: bool
    reason: str = ""


@dataclass(frozen=True)
class Checked:
    """The sentences kept (with citations renumbered 1..m), those dropped, and precision."""

    text: str
    citations: tuple[Citation, ...]
    kept: tuple[CheckedSentence, ...]
    dropped: tuple[CheckedSentence, ...]

    @property
    def precision(self) -> float:
        cited = [s for s in (*self.kept, *self.dropped) if s.cited]
        return sum(s.supported for s in cited) / len(cited) if cited else 0.0


def parse(draft: str) -> list[tuple[str, tuple[int, ...]]]:
    """Sentences of a draft with the passage numbers each cites (markers removed)."""
    out = []
    # "Claim. [1] Next claim." puts the marker after the period; move it before, so the marker
    # stays with the sentence it belongs to when the draft is split
    draft = TRAILING_MARKERS.sub(lambda m: f" {m.group(2).strip()}{m.group(1)} ", draft)
    for sentence in split_sentences(draft):
        cited = tuple(
            int(n) for group in MARKER.findall(sentence) for n in re.split(r"\s*,\s*", group)
        )
        text = MARKER.sub("", sentence).strip()
        if text:
            out.append((text, tuple(dict.fromkeys(cited))))
    return out


UNITS = {
    "%": "%", "percent": "%", "mg": "mg", "milligram": "mg", "mcg": "mcg", "µg": "mcg",
    "microgram": "mcg", "g": "g", "gram": "g", "kg": "kg", "ml": "ml", "l": "l", "mmol": "mmol",
    "mmhg": "mmhg", "bpm": "bpm", "second": "second", "minute": "minute", "min": "minute",
    "hour": "hour", "h": "hour", "hr": "hour", "day": "day", "week": "week", "wk": "week",
    "month": "month", "year": "year", "yr": "year", "time": "times", "fold": "times",
    "cigarette": "cigarette", "dose": "dose", "patient": "patient", "people": "people",
}


def _numbers(text: str) -> set[tuple[str, str]]:
    """(value, unit) pairs; the unit is "" when the word after the number is not a unit."""
    out = set()
    for value, word in NUMBER.findall(text):
        word = (word or "").lower()
        unit = UNITS.get(word) or UNITS.get(word.rstrip("s")) or ""
        out.add((value.replace(",", ""), unit))
    return out


def lexical_support(sentence: str, passage: str) -> float:
    """Share of the sentence's distinct content words found in the passage."""
    wanted = stems(sentence)
    if not wanted:
        return 1.0
    have = stems(passage)
    return len(wanted & have) / len(wanted)


def support(sentence: str, passage: str) -> tuple[bool, str]:
    """Whether ``passage`` supports ``sentence``, and if not, why."""
    score = lexical_support(sentence, passage)
    if score < MIN_LEXICAL_SUPPORT:
        return False, f"only {score:.0%} of its content words are in the passage"
    have = _numbers(passage)
    have_values = {n for n, _ in have}
    for number, unit in sorted(_numbers(sentence)):
        if number not in have_values:
            return False, f"the number {number} is not in the passage"
        if unit and (number, unit) not in have:
            return False, f"{number} {unit} does not match the passage's units"
    s_neg = NEGATIONS & set(re.findall(r"[a-z]+", sentence.lower()))
    p_neg = NEGATIONS & set(re.findall(r"[a-z]+", passage.lower()))
    if s_neg and not p_neg:
        return False, f"it negates ({', '.join(sorted(s_neg))}) where the passage does not"
    return True, ""


def check(draft: str, context: Sequence[Candidate]) -> Checked:
    kept: list[CheckedSentence] = []
    dropped: list[CheckedSentence] = []
    for text, cited in parse(draft):
        if not cited:
            dropped.append(CheckedSentence(text, cited, False, "it cites no passage"))
            continue
        missing = [n for n in cited if not 1 <= n <= len(context)]
        if missing:
            dropped.append(CheckedSentence(
                text, cited, False, f"it cites passage {missing[0]}, which does not exist"))
            continue
        verdicts = [support(text, context[n - 1].chunk.text) for n in cited]
        if all(ok for ok, _ in verdicts):
            kept.append(CheckedSentence(text, cited, True))
        else:
            reason = next(r for ok, r in verdicts if not ok)
            dropped.append(CheckedSentence(text, cited, False, reason))
    numbering: dict[int, int] = {}
    for s in kept:
        for n in s.cited:
            numbering.setdefault(n, len(numbering) + 1)
    citations = tuple(
        Citation(new, context[old - 1].chunk.doc_id, context[old - 1].chunk.heading,
                 context[old - 1].chunk.id, context[old - 1].chunk.text)
        for old, new in numbering.items()
    )
    text = " ".join(_with_markers(s.text, [numbering[n] for n in s.cited]) for s in kept)
    return Checked(text, citations, tuple(kept), tuple(dropped))


def _with_markers(sentence: str, numbers: list[int]) -> str:
    """``Claim [1][2].``: markers go before the sentence's closing punctuation."""
    markers = "".join(f"[{n}]" for n in numbers)
    body = sentence.rstrip()
    if body and body[-1] in ".!?":
        return f"{body[:-1]} {markers}{body[-1]}"
    return f"{body} {markers}"
