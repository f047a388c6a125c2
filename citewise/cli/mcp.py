"""``citewise mcp``: the MCP server over stdio, on the knowledge bases of the local store.

An MCP client (Claude Desktop, an IDE, an agent) starts it as a subprocess and speaks JSON-RPC
on its stdin and stdout; nothing else is ever written to stdout. The tools are those of
``citewise/api/mcp_tools.py``; this module gives them the store and the knowledge bases named.
"""

from __future__ import annotations

import threading
from typing import Any

import typer

from citewise.cli.common import engine
from citewise.engine import Engine
from citewise.errors import CitewiseError, ConfigError, KnowledgeBaseError
from citewise.output import chunk_dict, to_dict
from citewise.records import Turn


class LocalSource:
    """The knowledge bases ``names`` of one store (every one when ``names`` is empty). Calls
    take turns: one store connection, used by one thread at a time."""

    def __init__(self, eng: Engine, names: tuple[str, ...], generator: str | None = None) -> None:
        self.engine, self.names, self.generator = eng, names, generator
        self._lock = threading.Lock()
        for name in names:  # a name that is not there is an error now, not at the first call
            eng.store.get_kb(name)

    def _kb(self, name: str):
        if self.names and name not in self.names:
            raise KnowledgeBaseError(f"No knowledge base named {name!r}")
        return self.engine.store.get_kb(name)

    def knowledge_bases(self) -> list[dict[str, Any]]:
        with self._lock:
            store = self.engine.store
            kbs = [self._kb(n) for n in self.names] if self.names else store.list_kbs()
            return [{"name": kb.name, "documents": len(store.list_documents(kb)),
                     "chunks": store.count_chunks(kb)} for kb in kbs]

    def ask(self, kb: str, question: str, history: list[Turn]) -> dict[str, Any]:
        with self._lock:
            return to_dict(self.engine.ask(self._kb(kb), question, generator=self.generator,
                                           history=history))

    def search(self, kb: str, query: str, k: int, mode: str) -> dict[str, Any]:
        with self._lock:
            found = self.engine.retrieve(self._kb(kb), query, mode=mode, k=k)
        return {"query": query, "mode": mode, "chunks": [chunk_dict(c) for c in found.context]}

    def passage(self, kb: str, chunk_id: str) -> dict[str, Any]:
        with self._lock:
            chunk = self.engine.store.chunk_by_id(self._kb(kb), chunk_id)
        if chunk is None:
            raise KnowledgeBaseError(f"No passage {chunk_id!r} in knowledge base {kb!r}")
        return {"kb": kb, "chunk_id": chunk.id, "doc_id": chunk.doc_id, "title": chunk.title,
                "section": chunk.heading, "heading_path": list(chunk.section), "text": chunk.text}

    def detail(self, error: CitewiseError) -> str:
        return str(error)


def mcp(
    ctx: typer.Context,
    kb: list[str] = typer.Option(
        [], "--kb", help="A knowledge base the MCP client may use; repeat for more [default: "
        "every knowledge base in the store]."),
    generator: str = typer.Option(
        None, help="Generator spec, as for `ask` [default: each knowledge base's]."),
) -> None:
    """Serve knowledge bases to an MCP client over stdio.

    Serve the knowledge bases to an MCP client over stdio (tools: list_knowledge_bases, ask,
    search; passages as resources). The client starts this command; see docs/integrations.md."""
    try:
        from citewise.api.mcp_tools import build_server
    except ImportError as e:
        raise ConfigError(f"`citewise mcp` needs the serve extra (the MCP SDK; {e.name} is "
                          "missing): pip install 'citewise[serve]'") from None
    from citewise import __version__

    source = LocalSource(engine(ctx), tuple(dict.fromkeys(kb)), generator)
    build_server(lambda _ctx: source, version=__version__).run("stdio")


def register(app: typer.Typer) -> None:
    app.command()(mcp)
