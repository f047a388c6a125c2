"""HTTP request and response bodies. Requests forbid unknown fields; the ask response is the
object ``citewise ask --json`` prints (``citewise/output.py``). The chunker and retrieval mode
names a request may give are the registries' (``chunking.CHUNKERS``, ``retrieval.MODES``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from citewise.answer.followup import MAX_TURN_CHARS, MAX_TURNS
from citewise.ingest.chunking import CHUNKERS
from citewise.search.retrieval import DEFAULT_MODE, MODES
from citewise.storable import problem as not_text

# Literal types built from the registries, so requests are validated against them; a type
# checker cannot follow a computed Literal, so to it they are plain strings
if TYPE_CHECKING:
    ChunkerName = str
    ModeName = str
else:
    ChunkerName = Literal[tuple(CHUNKERS)]
    ModeName = Literal[tuple(MODES)]


def _text(value: object) -> None:
    if isinstance(value, str):
        if bad := not_text(value):
            raise ValueError(f"holds {bad}, which cannot be stored; send UTF-8 text")
    elif isinstance(value, list | tuple | set | dict):
        for item in value.values() if isinstance(value, dict) else value:
            _text(item)


class Body(BaseModel):
    """A request body: unknown fields are refused, and so is a string anywhere in it holding a
    NUL or a lone surrogate (no store takes one: a 422 here, not a 500 from the store)."""

    model_config = ConfigDict(extra="forbid")

    @field_validator("*")
    @classmethod
    def _only_text(cls, value: object) -> object:
        _text(value)
        return value


# -- admin ----------------------------------------------------------------------------------

class TenantIn(Body):
    name: str = Field(..., min_length=1, max_length=64, examples=["acme"])


class TenantOut(BaseModel):
    id: int
    name: str
    created_at: str


class KeyIn(Body):
    kind: Literal["tenant", "widget"] = "tenant"
    kb: str | None = Field(None, max_length=64, description="The one knowledge base a widget key asks.")
    origins: list[str] = Field(default_factory=list, max_length=50,
                               description="Browser origins a widget key is accepted from.")
    rate_per_minute: int | None = Field(None, ge=1, le=1_000_000)
    label: str = Field("", max_length=200)


class KeyOut(BaseModel):
    id: int
    prefix: str
    kind: str
    kb: str | None
    origins: list[str]
    rate_per_minute: int
    label: str
    created_at: str
    revoked_at: str | None = None


class NewKeyOut(KeyOut):
    key: str = Field(..., description="The key itself: shown this once, stored only as a hash.")


# -- knowledge bases and documents ----------------------------------------------------------

class KBIn(Body):
    name: str = Field(..., min_length=1, max_length=48, examples=["docs"])
    chunker: ChunkerName | None = None
    embedder: str | None = Field(None, max_length=200, description="One of the embedders the "
                                 "server allows (CITEWISE_EMBEDDERS) [default: the server's].")
    generator: str | None = Field(None, max_length=200, description="One of the generators the "
                                  "server allows (CITEWISE_GENERATORS) [default: its first].")


class KBOut(BaseModel):
    name: str
    created_at: str
    embedder: str
    generator: str
    chunker: str
    documents: int
    chunks: int
    gate: dict[str, object]


class DocumentOut(BaseModel):
    doc_id: str
    title: str
    chunks: int
    content_hash: str
    ingested_at: str


class FileResult(BaseModel):
    filename: str
    doc_id: str | None
    status: Literal["added", "replaced", "unchanged", "rejected"]
    chunks: int = 0
    reason: str | None = None


def rejected_detail(results: list[tuple[str, str | None]]) -> str:
    """An error answer's ``detail`` from its items' ``(name, reason)``: why none was stored."""
    detail = "Nothing was stored: " + "; ".join(f"{name}: {why}" for name, why in results if why)
    return detail if len(detail) <= 500 else detail[:497] + "..."


class UploadOut(BaseModel):
    files: list[FileResult]
    detail: str | None = Field(None, description="On an error status: why no file was stored "
                               "(every error answer has a `detail`); on a 503, the files stored "
                               "before the store or embedder failed, and those not stored.")


class UrlsIn(Body):
    urls: list[Annotated[str, Field(min_length=1, max_length=2000)]] = Field(
        ..., min_length=1, max_length=20,
                            description="Pages or sitemaps, on hosts the server fetches from.",
                            examples=[["https://docs.example.com/sitemap.xml"]])
    depth: int = Field(0, ge=0, le=2, description="Follow same-site links this many clicks.")
    max_pages: int | None = Field(None, ge=1, description="Fetch at most this many pages "
                                  "[default and most: the server's CITEWISE_WEB_MAX_PAGES].")


class PageResult(BaseModel):
    url: str
    status: Literal["added", "replaced", "unchanged", "skipped"]
    reason: str | None = None


class UrlsOut(BaseModel):
    pages: list[PageResult]
    chunks: int
    detail: str | None = Field(None, description="On an error status: why no page was stored.")


class JobOut(BaseModel):
    """An ingestion job: ``files`` holds the results of the files done so far, in upload order
    (the objects a synchronous upload returns); ``error`` says why a failed job failed."""

    id: str
    kb: str
    state: Literal["queued", "running", "done", "failed"]
    documents_done: int
    documents_total: int
    files: list[FileResult]
    error: str | None = None
    created_at: str
    updated_at: str


# -- asking ---------------------------------------------------------------------------------

class TurnIn(Body):
    role: Literal["user", "assistant"]
    content: str = Field(..., min_length=1, max_length=MAX_TURN_CHARS)


class AskIn(Body):
    question: str = Field(..., max_length=20_000, examples=["How long do withdrawal symptoms last?"])
    stream: bool = Field(False, description="Stream stage events (server-sent events).")
    history: list[TurnIn] = Field(
        default_factory=list, max_length=MAX_TURNS,
        description=f"The conversation so far, oldest first (at most {MAX_TURNS} turns of "
        f"{MAX_TURN_CHARS:,} characters): a follow-up question is made standalone from it "
        "before retrieval (`standalone_question` in the response).",
        examples=[[{"role": "user", "content": "What is varenicline?"},
                   {"role": "assistant", "content": "Varenicline is a prescription tablet [1]."}]])


class CitationOut(BaseModel):
    n: int
    doc_id: str
    title: str = Field("", description="The document's title, to show a reader: its own (a "
                       "Markdown file's first heading, a page's or PDF's title), else its file "
                       "name without the suffix; its `doc_id` when it has none.")
    section: str
    chunk_id: str
    quote: str


class ChunkOut(BaseModel):
    doc_id: str
    section: str
    chunk_id: str | None = Field(..., description="Null in a refusal shown to a widget key.")
    cosine: float
    bm25: float
    rrf: float = Field(..., description="The same as `fused` (its first name, kept as an alias).")
    fused: float = Field(..., description="The score under the knowledge base's fusion (convex "
                         "by default, or reciprocal rank fusion).")
    text: str | None = Field(..., description="Null in a refusal shown to a widget key: it "
                             "lists headings and scores, not passages.")


class GatePartOut(BaseModel):
    question: str
    answer: bool
    signal: float


class GateOut(BaseModel):
    policy: str
    signal: float
    threshold: float
    parts: list[GatePartOut] = Field(default_factory=list, description="Each part of a "
                                     "question with several, decided alone; empty for one part.")


class DroppedOut(BaseModel):
    sentence: str | None = Field(..., description="A sentence of the draft, without its "
                                 "markers; null in a refusal shown to a widget key (a drafted "
                                 "sentence may quote a passage).")
    reason: str = Field(..., description="Why the citation check removed it, in plain words.")


class AskOut(BaseModel):
    status: Literal["answered", "refused"]
    question: str
    standalone_question: str = Field(..., description="The question as retrieval and the gate "
                                     "read it: a follow-up made standalone from `history`.")
    answer: str | None
    citations: list[CitationOut]
    reason: str | None
    path: str
    related: list[str]
    chunks: list[ChunkOut]
    gate: GateOut
    uncovered: list[str] = Field(..., description="The parts of a question with several that "
                                 "the sources do not cover; the answer ends by naming them.")
    dropped: list[DroppedOut] = Field(..., description="Sentences the citation check removed, "
                                      "with the reason; when it refused, every sentence drafted.")
    warnings: list[str]
    timings: dict[str, float]
    query_id: int | None = Field(None, description="Always null over HTTP (kept for "
                                 "compatibility): give feedback with `feedback_token`.")
    citation_precision: float | None = None
    feedback_token: str | None = Field(None, description="Random, for this answer's feedback.")


class SearchIn(Body):
    query: str = Field(..., max_length=20_000)
    k: int = Field(8, ge=1, le=100)
    mode: ModeName = DEFAULT_MODE


class SearchOut(BaseModel):
    query: str
    mode: str
    chunks: list[ChunkOut]


class PassageOut(BaseModel):
    kb: str
    chunk_id: str
    doc_id: str
    title: str
    section: str
    heading_path: list[str]
    text: str


class FeedbackIn(Body):
    feedback_token: str = Field(..., min_length=1, max_length=128,
                                description="The `feedback_token` of the ask response.")
    helpful: bool
    comment: str = Field("", max_length=2000)


class FeedbackOut(BaseModel):
    id: int | None = Field(None, description="Always null (kept for compatibility).")
    query_id: int | None = Field(None, description="Always null (kept for compatibility).")
    helpful: bool


class Problem(BaseModel):
    detail: str
