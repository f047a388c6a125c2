"""The records passed between parts: frozen dataclasses, no behaviour beyond derived values."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from functools import cached_property
from typing import Literal

SectionKind = Literal["text", "faq", "table", "list"]
RefusalPath = Literal["gate", "citation_check", "generation_failed", "empty"]  # where it refused


@dataclass(frozen=True)
class Section:
    """One section of a document: its heading path and its paragraphs, in order.

    ``heading`` is the path from the top, e.g. ``("Varenicline", "Dosing")``; the document
    title is not part of it. ``kind`` marks structured content (FAQ entries, tables) that the
    window chunker keeps whole.
    """

    heading: tuple[str, ...]
    paragraphs: tuple[str, ...]
    kind: SectionKind = "text"


@dataclass(frozen=True)
class Document:
    """A loaded document: id (path relative to the folder ingested, or a BEIR ``_id``)."""

    id: str
    title: str
    sections: tuple[Section, ...]
    source: str

    @property
    def content_hash(self) -> str:
        h = hashlib.sha256(self.title.encode())
        for s in self.sections:
            h.update(b"\x1e" + "\x1f".join(s.heading).encode() + b"\x1d" + s.kind.encode())
            for p in s.paragraphs:
                h.update(b"\x1c" + p.encode())
        return h.hexdigest()

    @property
    def text(self) -> str:
        return "\n\n".join(p for s in self.sections for p in s.paragraphs)


@dataclass(frozen=True)
class Chunk:
    """A piece of a document that is embedded, indexed and cited.

    ``text`` is what a person reads and what is quoted; ``embed_text`` adds the heading path on
    lines of its own (``## Methods``) so the vector knows where the passage sits. The id is a
    content hash of document, heading path and text, so unchanged content keeps its id.
    """

    doc_id: str
    ordinal: int
    section: tuple[str, ...]
    text: str
    title: str = ""

    @cached_property
    def id(self) -> str:
        """Hashed once per chunk object: a question reads each of its context's ids a few
        dozen times (gate, generator, check, query log)."""
        key = "\x1f".join((self.doc_id, *self.section, self.text))
        return hashlib.sha256(key.encode()).hexdigest()[:20]

    @property
    def heading(self) -> str:
        """The heading path as one line, for display: ``Varenicline › Dosing``."""
        return " › ".join(self.section) if self.section else self.title

    @property
    def embed_text(self) -> str:
        lines = [self.title] if self.title else []
        lines += [f"{'#' * min(depth, 6)} {h}" for depth, h in enumerate(self.section, 2)]
        return "\n".join([*lines, self.text])


@dataclass(frozen=True)
class Candidate:
    """A retrieved chunk with every score it earned. Ranks are 1-based; 0 means absent."""

    chunk: Chunk
    cosine: float
    bm25: float = 0.0
    rrf: float = 0.0  # the fused score, of whichever fusion the settings name (``fused``)
    dense_rank: int = 0
    bm25_rank: int = 0

    @property
    def fused(self) -> float:
        """The fused score (convex by default, or RRF); ``rrf`` is its historical name."""
        return self.rrf


@dataclass(frozen=True)
class Signals:
    """What the gate looks at: raw cosines (never fused scores) and the question's word coverage.

    ``pool`` is the mean cosine of the dense top-k: how much of the collection is about the
    question's subject at all; ``margin`` how far the best chunk stands above it. The
    sentence-level signals (``evidence.py``): ``sentence_terms``, the best context sentence's
    IDF-weighted share of the question's key terms; ``sentence_cosine``, the best context
    sentence's cosine with the question; ``agreement``, the share of the dense top 5 that the
    keyword top 5 holds too. ``kb_terms`` (``absent.py``): the IDF-weighted share of the
    question's key terms that any chunk of the knowledge base holds (1 when not looked up).
    ``answerable`` (``reading.py``): the reader's highest P(answers) among the context units
    closest to the question (0 without a reader).
    """

    top1: float
    mean: float
    n_context: int
    coverage: float = 0.0
    pool: float = 0.0
    sentence_terms: float = 0.0
    sentence_cosine: float = 0.0
    agreement: float = 0.0
    kb_terms: float = 1.0
    answerable: float = 0.0

    @property
    def margin(self) -> float:
        return self.top1 - self.pool


@dataclass(frozen=True)
class Decision:
    answer: bool
    policy: str
    signal: float
    threshold: float
    reason: str = ""


@dataclass(frozen=True)
class Turn:
    """One earlier turn of a conversation: what the user asked, or what was answered."""

    role: Literal["user", "assistant"]
    content: str


@dataclass(frozen=True)
class Part:
    """One part of a question with several (``followup.split``), made standalone, and the
    gate's decision on it alone: whether the sources cover that part."""

    question: str
    decision: Decision


@dataclass(frozen=True)
class Citation:
    """Passage ``n`` of an answer: its document (``doc_id``; ``title``, the document's own, to
    show a reader), its section, its chunk and what the answer quotes from it."""

    n: int
    doc_id: str
    section: str
    chunk_id: str
    quote: str
    title: str = ""


@dataclass(frozen=True)
class Draft:
    """What a generator returns: text with ``[n]`` markers pointing into the context."""

    text: str
    model: str = ""


@dataclass(frozen=True)
class Dropped:
    """A sentence of the draft that the citation check removed, and why, in plain words."""

    sentence: str
    reason: str


@dataclass(frozen=True)
class Answer:
    question: str
    text: str
    citations: tuple[Citation, ...]
    chunks: tuple[Candidate, ...]
    decision: Decision
    dropped: tuple[Dropped, ...] = ()
    timings: dict[str, float] = field(default_factory=dict, hash=False, compare=False)
    warnings: tuple[str, ...] = ()
    status: Literal["answered"] = "answered"
    query_id: int | None = None  # the query log row, set once the question is logged
    # supported / cited sentences of the draft, as the citation check measured it
    citation_precision: float = 1.0
    feedback_token: str | None = None  # random; the log keeps its sha256 (feedback over HTTP)
    # the question as retrieval and the gate read it (``followup.standalone``); "" if as asked
    standalone: str = ""
    parts: tuple[Part, ...] = ()  # a question with several parts: each one's own decision

    @property
    def uncovered(self) -> tuple[str, ...]:
        """The parts of the question the sources do not cover (not answered)."""
        return tuple(p.question for p in self.parts if not p.decision.answer)


@dataclass(frozen=True)
class Refusal:
    question: str
    reason: str
    related: tuple[str, ...]
    chunks: tuple[Candidate, ...]
    decision: Decision
    path: RefusalPath = "gate"
    timings: dict[str, float] = field(default_factory=dict, hash=False, compare=False)
    warnings: tuple[str, ...] = ()
    status: Literal["refused"] = "refused"
    query_id: int | None = None
    feedback_token: str | None = None
    dropped: tuple[Dropped, ...] = ()  # the draft's sentences, when refused at the citation check
    standalone: str = ""
    parts: tuple[Part, ...] = ()

    @property
    def uncovered(self) -> tuple[str, ...]:
        return tuple(p.question for p in self.parts if not p.decision.answer)
