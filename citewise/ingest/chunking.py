"""Chunking: ``sections`` (the clinical system's) and ``window`` (the multi-tenant system's).

``sections`` keeps each paragraph of a section as a chunk (short neighbours in the same
section joined), and splits a paragraph whose embedded text (heading path included) is over
the limit, counted with the embedding model's own tokenizer, at sentence boundaries with a
two-sentence overlap (``SectionsChunker(overlap=...)``; ``benchmarks/repeated_text.py`` measures
what it buys). The limit is 512 tokens or the model's own input limit if smaller
(all-MiniLM-L6-v2 reads 254 word pieces besides its two special tokens).

``window`` makes sentence-aware windows of about 2,800 characters with 350 characters of
overlap, never cutting a sentence; FAQ entries, tables and pricing or spec sections are kept
whole as one chunk each.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Protocol

from citewise.errors import UnknownNameError
from citewise.ingest.documents import is_list_item
from citewise.ingest.units import is_table
from citewise.records import Chunk, Document, Section
from citewise.sentences import split_sentences

MAX_TOKENS = 512
MERGE_BELOW_TOKENS = 48
OVERLAP_SENTENCES = 2


class Chunker(Protocol):
    name: str

    def chunk(self, doc: Document) -> list[Chunk]: ...


def _by_lines(paragraph: str, kind: str) -> bool:
    """Whether ``paragraph`` is cut at its lines (a table's rows, a list's items)."""
    return kind == "table" or "\n" in paragraph


def _units(paragraph: str, kind: str) -> list[str]:
    """Sentences of prose; rows of a table and items of a list (each its own unit)."""
    if _by_lines(paragraph, kind):
        return [line for line in paragraph.splitlines() if line.strip()]
    return split_sentences(paragraph)


def _dedupe(chunks: list[Chunk]) -> list[Chunk]:
    seen: set[str] = set()
    out: list[Chunk] = []
    for c in chunks:
        if c.id not in seen:
            seen.add(c.id)
            out.append(Chunk(c.doc_id, len(out), c.section, c.text, c.title))
    return out


def _longest(fits: Callable[[int], bool], low: int, high: int) -> int:
    """The largest ``n`` in ``[low, high]`` for which ``fits(n)``, ``low`` if none is larger.

    ``fits(n)`` asks whether the first ``n`` units fit; token counts grow with the text, so
    once a prefix is too long every longer one is too. Doubling and then halving finds the
    end in O(log) calls; trying one unit more at a time tokenized a window once per unit,
    O(window squared) for each window.
    """
    step = 1
    while low < high:
        probe = min(low + step, high)
        if not fits(probe):
            high = probe - 1
            break
        low, step = probe, step * 2
    while low < high:
        mid = (low + high + 1) // 2
        if fits(mid):
            low = mid
        else:
            high = mid - 1
    return low


class SectionsChunker:
    name = "sections"

    def __init__(self, count_tokens: Callable[[str], int], max_tokens: int = MAX_TOKENS,
                 overlap: int = OVERLAP_SENTENCES, additive: bool = False) -> None:
        """``overlap``: sentences (rows, items) a split paragraph's piece repeats of the piece
        before it (0: none). ``additive``: texts joined by white space count the sum of their
        tokens (a tokenizer that splits at white space first, as BERT's WordPiece does), so a
        split paragraph's units are counted once each rather than every prefix tried again."""
        if overlap < 0:
            raise ValueError(f"overlap is a number of sentences, 0 or more, not {overlap}")
        self.count = count_tokens
        self.limit = max_tokens
        self.overlap = overlap
        self.additive = additive

    def _fits(self, doc: Document, section: Section, text: str) -> bool:
        return self.count(Chunk(doc.id, 0, section.heading, text, doc.title).embed_text) <= self.limit

    def _split(self, doc: Document, section: Section, paragraph: str) -> list[str]:
        units = _units(paragraph, section.kind)
        joiner = "\n" if _by_lines(paragraph, section.kind) else " "
        # a table cut in pieces repeats its header row at the top of each piece, so that every
        # row is read, embedded and cited under its header (``units.table_rows``)
        head: list[str] = []
        if len(units) > 1 and all(is_table(u) for u in units):
            head, units = units[:1], units[1:]
        pieces: list[str] = []
        start = 0
        if self.additive:  # the lines above the text, the header row and each unit, once
            fixed = self.count(Chunk(doc.id, 0, section.heading, joiner.join(head), doc.title).embed_text)
            sums = list(itertools.accumulate((self.count(u) for u in units), initial=0))
        while start < len(units):
            def fits(n: int, s: int = start) -> bool:
                if self.additive:
                    return fixed + sums[n] - sums[s] <= self.limit
                return self._fits(doc, section, joiner.join(head + units[s:n]))

            end = _longest(fits, start + 1, len(units))
            piece = joiner.join(head + units[start:end])
            # the piece fits unless it is one unit too long alone: then it is cut by words
            if not (fits(end) if self.additive else self._fits(doc, section, piece)):
                pieces.extend(self._cut_words(doc, section, piece))
            else:
                pieces.append(piece)
            if end >= len(units):
                break
            # ``overlap`` sentences of overlap (two by default), but always move forward
            start = max(end - self.overlap, start + 1)
        return pieces

    def _cut_words(self, doc: Document, section: Section, text: str) -> list[str]:
        words, start = text.split(), 0
        out: list[str] = []
        while start < len(words):
            def fits(n: int, s: int = start) -> bool:
                return self._fits(doc, section, " ".join(words[s:n]))

            end = _longest(fits, start + 1, len(words))
            out.append(" ".join(words[start:end]))
            start = end
        return out

    def chunk(self, doc: Document) -> list[Chunk]:
        chunks: list[Chunk] = []
        for section in doc.sections:
            pending = ""
            for paragraph in section.paragraphs:
                if pending:
                    joined = pending + "\n\n" + paragraph
                    belongs = pending.rstrip().endswith(":") or is_list_item(paragraph)
                    short = self.count(pending) < MERGE_BELOW_TOKENS
                    if (belongs or short) and self._fits(doc, section, joined):
                        pending = joined
                        continue
                    chunks.extend(self._make(doc, section, pending))
                pending = paragraph
            if pending:
                chunks.extend(self._make(doc, section, pending))
        return _dedupe(chunks)

    def _make(self, doc: Document, section: Section, text: str) -> list[Chunk]:
        texts = [text] if self._fits(doc, section, text) else self._split(doc, section, text)
        return [Chunk(doc.id, 0, section.heading, t, doc.title) for t in texts]


class WindowChunker:
    name = "window"

    def __init__(self, size: int = 2800, overlap: int = 350) -> None:
        self.size = size
        self.overlap = overlap

    def chunk(self, doc: Document) -> list[Chunk]:
        chunks: list[Chunk] = []
        # (heading, unit, what joins it to the unit before: a blank line between paragraphs, a
        # line break between a list's items, a space between sentences) of prose sections
        run: list[tuple[tuple[str, ...], str, str]] = []
        for section in doc.sections:
            if section.kind in ("faq", "table"):
                chunks.extend(self._windows(doc, run))
                run = []
                chunks.append(Chunk(doc.id, 0, section.heading, "\n\n".join(section.paragraphs),
                                    doc.title))
                continue
            for paragraph in section.paragraphs:
                inner = "\n" if _by_lines(paragraph, section.kind) else " "
                run.extend((section.heading, u, inner if i else "\n\n")
                           for i, u in enumerate(_units(paragraph, section.kind)))
        chunks.extend(self._windows(doc, run))
        return _dedupe(chunks)

    def _windows(self, doc: Document, run: list[tuple[tuple[str, ...], str, str]]) -> list[Chunk]:
        out: list[Chunk] = []
        start = 0
        while start < len(run):
            end, length = start + 1, len(run[start][1])
            while end < len(run) and length + len(run[end][2]) + len(run[end][1]) <= self.size:
                length += len(run[end][2]) + len(run[end][1])
                end += 1
            text = run[start][1] + "".join(sep + u for _, u, sep in run[start + 1 : end])
            out.append(Chunk(doc.id, 0, run[start][0], text, doc.title))
            if end >= len(run):
                break
            back, carried = end, 0
            while back - 1 > start and carried + len(run[back - 1][1]) <= self.overlap:
                back -= 1
                carried += len(run[back][1]) + 1
            start = back
        return out


DEFAULT_CHUNKER = SectionsChunker.name
# name -> factory taking the embedder's token counter and its input limit; the CLI's help and
# the API's ``chunker`` field list these names
CHUNKERS: dict[str, Callable[[Callable[[str], int], int, bool], Chunker]] = {
    SectionsChunker.name: lambda count_tokens, max_tokens, additive: SectionsChunker(
        count_tokens, min(MAX_TOKENS, max_tokens), additive=additive),
    WindowChunker.name: lambda count_tokens, max_tokens, additive: WindowChunker(),
}


def get_chunker(name: str, count_tokens: Callable[[str], int], max_tokens: int,
                additive: bool = False) -> Chunker:
    """The chunker ``name`` for an embedder that reads ``max_tokens`` of one text (whose token
    counts add up over white space: ``additive``)."""
    factory = CHUNKERS.get(name)
    if factory is None:
        raise UnknownNameError("chunker", name, list(CHUNKERS))
    return factory(count_tokens, max_tokens, additive)
