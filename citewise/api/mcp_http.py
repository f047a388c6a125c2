"""``/v1/mcp``: the MCP tools (``mcp_tools.py``) over streamable HTTP, for a tenant key.

The route is an ordinary FastAPI route, so the key is checked (and the rate limit counted) by
the same dependencies as every tenant route, before the body is read; the body limit is the
JSON routes' (``limits.py``). Only then is the request handed to the SDK's transport, which
serves it statelessly (no MCP session to keep or to take over: each request carries its key)
and answers in JSON. Each tool reaches only the knowledge bases of the key's tenant, through
``deps.resolve`` as the REST routes do, embeds and generates inside the tenant's compute lanes
(``compute.py``), and shows what the REST routes show: ``query_id`` null, provider and store
failures in general words. A widget key is refused (403): it is for a web page's chat widget.
The server sends nothing a client did not ask for, so it offers no server-to-client stream:
``GET`` is 405, as the protocol says (it opened a stream that was never closed).
The route is not in the OpenAPI schema (it speaks JSON-RPC, not REST); docs/integrations.md.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import APIRouter, Depends, FastAPI, Request
from mcp.server.mcpserver import Context
from mcp.server.transport_security import TransportSecuritySettings
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from citewise import __version__
from citewise.answer.questions import check_history, check_question
from citewise.api import ask as asking
from citewise.api.compute import public_detail
from citewise.api.deps import Caller, resolve, tenant_caller
from citewise.api.mcp_tools import build_server
from citewise.api.models import SearchIn
from citewise.api.settings import Settings
from citewise.errors import CitewiseError
from citewise.output import to_dict
from citewise.records import Turn

ROUTE = "/v1/mcp"
CALLER = "citewise.caller"  # the ASGI scope key the route leaves the caller under
router = APIRouter(tags=["mcp"])


class TenantSource:
    """The knowledge bases of one API key's tenant (``mcp_tools.Source``)."""

    def __init__(self, caller: Caller, request: Request) -> None:
        self.caller, self.request = caller, request

    def knowledge_bases(self) -> list[dict[str, Any]]:
        store = self.caller.services.store()
        return [{"name": kb.name, "documents": len(store.list_documents(kb)),
                 "chunks": store.count_chunks(kb)}
                for kb in store.list_kbs(tenant=self.caller.key.tenant_id)]

    def ask(self, kb: str, question: str, history: list[Turn]) -> dict[str, Any]:
        s = resolve(self.caller, kb)
        question, turns = check_question(question), list(check_history(history))
        with s.compute():
            data = asking._shown(s, to_dict(s.engine().ask(s.kb, question, history=turns)))
        asking._count(self.request, s, data)
        return data

    def search(self, kb: str, query: str, k: int, mode: str) -> dict[str, Any]:
        return asking.search(SearchIn(query=query, k=k, mode=mode), resolve(self.caller, kb))

    def passage(self, kb: str, chunk_id: str) -> dict[str, Any]:
        return asking.passage(chunk_id, resolve(self.caller, kb))

    def detail(self, error: CitewiseError) -> str:
        return public_detail(error)


def _source(ctx: Context) -> TenantSource:
    request = ctx.request_context.request
    if not isinstance(request, Request):  # only the HTTP transport comes here, with its request
        raise RuntimeError("the HTTP MCP tools were called without an HTTP request")
    return TenantSource(request.scope[CALLER], request)


@asynccontextmanager
async def serving(app: FastAPI, settings: Settings) -> AsyncIterator[None]:
    """Run the MCP transport for the app's lifetime (inside the app's lifespan)."""
    server = build_server(_source, version=__version__)
    server.streamable_http_app(
        stateless_http=True, json_response=True, max_request_body_size=settings.max_body_bytes,
        # the key authenticates every request; a Host check would only refuse a proxy's name
        transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False))
    async with server.session_manager.run():
        app.state.mcp = server.session_manager
        yield


class _HandOff(Response):
    """Hands the request, key checked, to the MCP transport, which reads the body and answers."""

    def __init__(self, caller: Caller) -> None:
        super().__init__()
        self.caller = caller

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        scope[CALLER] = self.caller
        await scope["app"].state.mcp.handle_request(scope, receive, send)


@router.api_route(ROUTE, methods=["POST", "DELETE"], include_in_schema=False)
def mcp(caller: Caller = Depends(tenant_caller)) -> Response:
    """The MCP endpoint (streamable HTTP, stateless, JSON responses); tenant key only."""
    return _HandOff(caller)


__all__ = ["ROUTE", "TenantSource", "router", "serving"]
