"""The citation contract, checked after generation for every answer.

A draft is split into sentences; each sentence must cite ``[n]`` passages that exist, and
every cited passage must support it (``support.score``: a lexical and embedding support score
with numbers, units, negation and polarity kept consistent) and, with a reader, not be read
by it as contradicting it (``reading.contradiction``). Unsupported sentences are dropped
and reported; the rest keep their citations, renumbered 1..m in order of use.
``precision`` is supported / cited sentences.

``Checker`` checks one sentence at a time, so a streamed draft can be passed on sentence by
sentence; ``check`` runs it over a whole draft. Both give the same verdicts.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from citewise.answer import support
from citewise.embedders import Embedder
from citewise.embedders.base import embed_cached
from citewise.ingest.units import join, split_units
from citewise.reader import Reader, reading
from citewise.records import Candidate, Citation

MARKER = re.compile(r"\s*\[(\d+(?:\s*,\s*\d+)*)\]")
TRAILING_MARKERS = re.compile(r"([.!?])((?:\s*\[\d+(?:\s*,\s*\d+)*\])+)")


@dataclass(frozen=True)
class CheckedSentence:
    text: str  # without markers
    cited: tuple[int, ...]  # passage numbers as the draft gave them
    supported: bool
    reason: str = ""
    scores: tuple[float, ...] = ()  # support score per cited passage, when it was scored
    quotes: tuple[str, ...] = ()  # per cited passage, its unit that supports the sentence best

    def shown(self, numbering: dict[int, int]) -> str:
        """The sentence with its renumbered markers before the closing punctuation."""
        markers = "".join(f"[{numbering[n]}]" for n in self.cited)
        body = self.text.rstrip()
        if body and body[-1] in ".!?":
            return f"{body[:-1]} {markers}{body[-1]}"
        return f"{body} {markers}"


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
    """Sentences of a draft with the passage numbers each cites (markers removed). A draft
    is split as passages are (``units.split_units``): a list item or a table row (with its
    header) is one sentence, and no sentence runs on into the block after it."""
    out = []
    # "Claim. [1] Next claim." puts the marker after the period; move it before, so the marker
    # stays with the sentence it belongs to when the draft is split
    draft = TRAILING_MARKERS.sub(lambda m: f" {m.group(2).strip()}{m.group(1)} ", draft)
    for sentence in split_units(draft):
        cited = tuple(
            int(n) for group in MARKER.findall(sentence) for n in re.split(r"\s*,\s*", group)
        )
        text = MARKER.sub("", sentence).strip()
        if text:
            out.append((text, tuple(dict.fromkeys(cited))))
    return out


class Checker:
    """Checks sentences against one context, keeping the renumbering of what it kept."""

    def __init__(self, context: Sequence[Candidate], embedder: Embedder | None = None,
                 threshold: float | None = None, reader: Reader | None = None) -> None:
        self.context, self.embedder, self.threshold = list(context), embedder, threshold
        self.reader = reader
        self.numbering: dict[int, int] = {}
        self.kept: list[CheckedSentence] = []
        self.dropped: list[CheckedSentence] = []
        self._vectors: dict[str, np.ndarray] = {}

    def prepare(self, sentences: Sequence[tuple[str, tuple[int, ...]]]) -> None:
        """Embed, in one call, every sentence and passage unit the given sentences need."""
        if self.embedder is None:
            return
        texts = [t for t, _ in sentences]
        for n in {n for _, cited in sentences for n in cited if 1 <= n <= len(self.context)}:
            texts += support.units(self.context[n - 1].chunk.text)
        new = list(dict.fromkeys(t for t in texts if t not in self._vectors))
        if new:
            self._vectors.update(zip(new, embed_cached(self.embedder, new), strict=True))

    def _support(self, text: str, n: int) -> support.Support:
        chunk = self.context[n - 1].chunk
        passage = chunk.text
        if self.embedder is None:
            found = support.score(text, passage, threshold=self.threshold)
        else:
            self.prepare([(text, (n,))])
            units = np.stack([self._vectors[u] for u in support.units(passage)])
            found = support.score(text, passage, self._vectors[text], units, self.threshold)
        if self.reader is None or not found.ok:
            return found
        parts = support.units(passage)
        against = reading.contradiction(self.reader, text, parts[:-1] if len(parts) > 1 else parts)
        return found if against is None else replace(found, ok=False, best=against.unit,
                                                      reason=against.reason)

    def sentence(self, text: str, cited: tuple[int, ...]) -> CheckedSentence:
        """The verdict on one sentence; a kept sentence's passages get their numbers now."""
        if not cited:
            result = CheckedSentence(text, cited, False, "it cites no passage")
        elif missing := [n for n in cited if not 1 <= n <= len(self.context)]:
            result = CheckedSentence(text, cited, False,
                                     f"it cites passage {missing[0]}, which does not exist")
        else:
            verdicts = [self._support(text, n) for n in cited]
            bad = next((v for v in verdicts if not v.ok), None)
            scores = tuple(round(v.score, 3) for v in verdicts)
            result = CheckedSentence(text, cited, bad is None, bad.reason if bad else "", scores,
                                     tuple(v.best for v in verdicts))
        if result.supported:
            for n in cited:
                self.numbering.setdefault(n, len(self.numbering) + 1)
            self.kept.append(result)
        else:
            self.dropped.append(result)
        return result

    def quote(self, n: int) -> str:
        """What a citation of passage ``n`` quotes: the units of the passage that best support
        the kept sentences citing it, in the passage's order (a table row with its header)."""
        passage = self.context[n - 1].chunk.text
        wanted = {q for s in self.kept for m, q in zip(s.cited, s.quotes, strict=False) if m == n}
        parts = [u for u in support.units(passage) if u in wanted]
        return join(list(dict.fromkeys(parts))) or passage

    def result(self) -> Checked:
        citations = tuple(
            Citation(new, c.doc_id, c.heading, c.id, self.quote(old), c.title)
            for old, new in self.numbering.items()
            for c in [self.context[old - 1].chunk]
        )
        text = join([s.shown(self.numbering) for s in self.kept], [s.cited for s in self.kept])
        return Checked(text, citations, tuple(self.kept), tuple(self.dropped))


def check(draft: str, context: Sequence[Candidate], embedder: Embedder | None = None,
          threshold: float | None = None) -> Checked:
    """Check a whole draft; with an embedder the support score includes embedding cosines."""
    checker = Checker(context, embedder, threshold)
    sentences = parse(draft)
    checker.prepare(sentences)
    for text, cited in sentences:
        checker.sentence(text, cited)
    return checker.result()
