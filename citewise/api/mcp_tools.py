"""The MCP server (Model Context Protocol, the official ``mcp`` SDK): the tools an agent calls,
the same over stdio (``citewise mcp``) and over the HTTP service (``/v1/mcp``).

    list_knowledge_bases()                    the knowledge bases this server (or key) may use
    ask(kb, question, history=[])             an answer with citations, or a refusal that says
                                              why: structured content is the ``ask --json``
                                              object (``AskOut``), the text content the answer
                                              and its sources (or the refusal) in words, and a
                                              resource link per citation
    search(kb, query, k=8, mode="hybrid")     the passages retrieval finds, with their scores
    citewise://{kb}/passages/{chunk_id}       a passage (resource template): the text a
                                              citation points to, under its document and section

What each one reaches is a ``Source``'s choice: ``citewise mcp`` reads a local store, the HTTP
service a tenant's knowledge bases under its key (``mcp_http.py``). A citewise error is a tool
error (``is_error``) with the message the source gives for it; nothing else is shown. ``search``
checks its arguments as the HTTP route checks its body (``SearchIn``: a query holding a NUL is
the same ``query: ...`` message, not a crash).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any, Protocol

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ResourceError, ResourceNotFoundError, ToolError
from mcp_types import CallToolResult, ContentBlock, ResourceLink, TextContent, ToolAnnotations
from pydantic import BaseModel, Field, ValidationError

from citewise.api.models import AskOut, ModeName, SearchIn, SearchOut, TurnIn
from citewise.api.problems import validation_detail
from citewise.errors import CitewiseError, KnowledgeBaseError
from citewise.records import Turn
from citewise.search.retrieval import DEFAULT_MODE

PASSAGE_URI = "citewise://{kb}/passages/{chunk_id}"
INSTRUCTIONS = (
    "citewise answers questions from a collection of documents, citing each claim with [n] "
    "markers that point to passages, or refuses and says why and what it found. Call "
    "list_knowledge_bases first, then ask. A refusal is an answer: the sources do not cover "
    "the question; do not answer it from elsewhere as if they did."
)
READ_ONLY = ToolAnnotations(read_only_hint=True, open_world_hint=False)


class KnowledgeBaseOut(BaseModel):
    name: str
    documents: int
    chunks: int


class KnowledgeBasesOut(BaseModel):
    knowledge_bases: list[KnowledgeBaseOut]


class Source(Protocol):
    """The knowledge bases one MCP caller may use. Each method raises ``CitewiseError`` (a
    missing knowledge base is ``KnowledgeBaseError``); ``detail`` says what the caller is told."""

    def knowledge_bases(self) -> list[dict[str, Any]]: ...
    def ask(self, kb: str, question: str, history: list[Turn]) -> dict[str, Any]: ...
    def search(self, kb: str, query: str, k: int, mode: str) -> dict[str, Any]: ...
    def passage(self, kb: str, chunk_id: str) -> dict[str, Any]: ...
    def detail(self, error: CitewiseError) -> str: ...


def passage_uri(kb: str, chunk_id: str) -> str:
    return PASSAGE_URI.format(kb=kb, chunk_id=chunk_id)


def _link(kb: str, n: int, doc_id: str, section: str, chunk_id: str) -> ResourceLink:
    return ResourceLink(uri=passage_uri(kb, chunk_id), name=f"[{n}] {doc_id}",
                        description=section or None, mime_type="text/markdown")


def answer_text(data: dict[str, Any]) -> str:
    """The ask object in words: the answer and its numbered sources, or the refusal's reason."""
    if data["status"] != "answered":
        return f"Not answered: {data['reason']}"
    sources = [f"[{c['n']}] {c['doc_id']} › {c['section']}: \u201c{c['quote']}\u201d"
               for c in data["citations"]]
    return "\n\n".join([data["answer"], "Sources:\n" + "\n".join(sources)] if sources
                       else [data["answer"]])


def search_text(data: dict[str, Any]) -> str:
    lines = [f"{i}. {c['doc_id']} › {c['section']} (cosine {c['cosine']:.3f})\n{c['text'] or ''}"
             for i, c in enumerate(data["chunks"], 1)]
    return "\n\n".join(lines) or "Nothing found."


def passage_markdown(data: dict[str, Any]) -> str:
    heading = " › ".join(data["heading_path"]) or data["title"] or data["doc_id"]
    return f"# {heading}\n\nFrom {data['doc_id']}.\n\n{data['text']}\n"


KB = Annotated[str, Field(min_length=1, max_length=64, description="A knowledge base's name "
                          "(list_knowledge_bases).")]


def build_server(source_for: Callable[[Context], Source], version: str = "") -> MCPServer:
    """The MCP server; ``source_for(ctx)`` is the source of the request in ``ctx``."""
    # WARNING: the SDK sets up the root logger if nothing has; its INFO lines would only
    # repeat, on the server's stderr, the tool errors the client is sent
    server = MCPServer("citewise", instructions=INSTRUCTIONS, version=version, log_level="WARNING")

    def run(ctx: Context, call: Callable[[Source], Any]) -> Any:
        source = source_for(ctx)
        try:
            return call(source)
        except CitewiseError as e:
            raise ToolError(source.detail(e)) from None
        except ValidationError as e:  # an argument the HTTP route's body would refuse
            raise ToolError(validation_detail([dict(d) for d in e.errors()])) from None

    @server.tool(annotations=READ_ONLY)
    def list_knowledge_bases(ctx: Context) -> KnowledgeBasesOut:
        """The knowledge bases you may ask, with their number of documents and passages."""
        return KnowledgeBasesOut(knowledge_bases=run(ctx, lambda s: s.knowledge_bases()))

    @server.tool(annotations=READ_ONLY)
    def ask(
        ctx: Context, kb: KB,
        question: Annotated[str, Field(min_length=1, max_length=20_000,
                                       description="The question, in words.")],
        history: Annotated[list[TurnIn], Field(
            max_length=20, description="The conversation so far, oldest first: a follow-up "
            "such as 'How is it dosed?' is read with the questions before it.")] = [],  # noqa: B006
    ) -> Annotated[CallToolResult, AskOut]:
        """Answer a question from a knowledge base with citations ([n] markers, each a passage
        you can read as a resource), or refuse and say why and which related topics it has."""
        turns = [Turn(t.role, t.content) for t in history]
        data = run(ctx, lambda s: s.ask(kb, question, turns))
        content: list[ContentBlock] = [TextContent(text=answer_text(data))]
        content += [_link(kb, c["n"], c["doc_id"], c["section"], c["chunk_id"])
                    for c in data["citations"]]
        return CallToolResult(content=content, structured_content=data)

    @server.tool(annotations=READ_ONLY)
    def search(
        ctx: Context, kb: KB,
        query: Annotated[str, Field(min_length=1, max_length=20_000)],
        k: Annotated[int, Field(ge=1, le=100, description="How many passages.")] = 8,
        mode: Annotated[ModeName, Field(description="Dense, keyword or both fused.")] = DEFAULT_MODE,
    ) -> Annotated[CallToolResult, SearchOut]:
        """The passages retrieval finds for a query, best first, with their cosine, BM25 and
        fused scores: no answer, and no refusal gate."""
        def found(source: Source) -> dict[str, Any]:
            body = SearchIn(query=query, k=k, mode=mode)  # checked as the HTTP route checks it
            return source.search(kb, body.query, body.k, body.mode)

        data = run(ctx, found)
        content: list[ContentBlock] = [TextContent(text=search_text(data))]
        content += [_link(kb, n, c["doc_id"], c["section"], c["chunk_id"])
                    for n, c in enumerate(data["chunks"], 1) if c["chunk_id"]]
        return CallToolResult(content=content, structured_content=data)

    @server.resource(PASSAGE_URI, name="passage", mime_type="text/markdown",
                     description="The passage a citation points to, under its document and section.")
    def passage(kb: str, chunk_id: str, ctx: Context) -> str:
        source = source_for(ctx)
        try:
            return passage_markdown(source.passage(kb, chunk_id))
        except KnowledgeBaseError as e:
            raise ResourceNotFoundError(source.detail(e)) from None
        except CitewiseError as e:
            raise ResourceError(source.detail(e)) from None

    return server


__all__ = ["PASSAGE_URI", "Source", "build_server", "passage_uri"]
