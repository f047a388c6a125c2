"""The MCP server, driven by the official SDK's own client on both transports: ``citewise mcp``
spawned as a subprocess over stdio, and ``/v1/mcp`` on a live HTTP service (streamable HTTP)
with tenant keys. The tools are listed and called; an answer carries citations as structured
content and resource links that read back as the passages; a refusal is a result, not an error;
a knowledge base outside the server's (or the key's) reach is a tool error that reads exactly
like a missing one."""

from __future__ import annotations

import json
import logging
import os
import socket
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx
import httpx2
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from typer.testing import CliRunner

from citewise.api.mcp_http import ROUTE
from citewise.cli import app as cli_app
from citewise.errors import KnowledgeBaseError
from citewise.stores import open_store
from tests.api_fixtures import (
    COVERED,
    OUT_OF_SCOPE,
    kb_with_sample,
    make_app,
    settings_for,
    tenant,
    upload,
)
from tests.helpers import ROOT, SAMPLE
from tests.live import serve

pytestmark = pytest.mark.heavy  # servers, processes, deadlines or megabytes: make test, not make unit

TOOLS = {"ask", "search", "list_knowledge_bases"}
SECRET = (b"# Plans\n\n## Launch\n\nThe varenicline dose schedule for days 1 to 3 once daily is "
          b"globex's own launch plan, code name Bluebird.\n")
FOLLOW_UP = [{"role": "user", "content": "What is varenicline?"},
             {"role": "assistant", "content": "Varenicline is a prescription tablet [1]."}]


def call(client_factory: Any, steps: Any) -> Any:
    """Open an SDK client, run ``steps(client)`` (a coroutine function), return what it returns."""
    async def main() -> Any:
        async with client_factory() as client:
            return await steps(client)
    return anyio.run(main)


# -- stdio: `citewise mcp` as a subprocess ----------------------------------------------------

@pytest.fixture(scope="module", name="stdio_db")
def stdio_db_fixture(tmp_path_factory: pytest.TempPathFactory) -> Path:
    db = tmp_path_factory.mktemp("mcp") / "kb.db"
    for kb in ("docs", "other"):
        r = CliRunner().invoke(cli_app, ["--db", str(db), "ingest", "--kb", kb, "--embedder",
                                         "hashing:256", "-q", str(SAMPLE)])
        assert r.exit_code == 0, r.output
    return db


def stdio(db: Path, *args: str) -> Any:
    path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    env = {**os.environ, "PYTHONPATH": path}
    params = StdioServerParameters(command=sys.executable, env=env, cwd=str(db.parent),
                                   args=["-m", "citewise", "--db", str(db), "mcp", *args])
    return lambda: Client(params)


def test_stdio_lists_and_calls_the_tools_and_reads_cited_passages(stdio_db: Path) -> None:
    async def steps(client: Client) -> dict:
        tools = (await client.list_tools()).tools
        kbs = await client.call_tool("list_knowledge_bases", {})
        answer = await client.call_tool("ask", {"kb": "docs", "question": COVERED})
        passage = await client.read_resource(answer.content[1].uri)
        refusal = await client.call_tool("ask", {"kb": "docs", "question": OUT_OF_SCOPE})
        found = await client.call_tool("search", {"kb": "docs", "query": "withdrawal", "k": 3})
        follow = await client.call_tool("ask", {"kb": "docs", "question": "How is it dosed?",
                                                "history": FOLLOW_UP})
        templates = (await client.list_resource_templates()).resource_templates
        return {"tools": tools, "kbs": kbs, "answer": answer, "passage": passage,
                "refusal": refusal, "found": found, "follow": follow, "templates": templates}

    got = call(stdio(stdio_db, "--kb", "docs"), steps)
    assert {t.name for t in got["tools"]} == TOOLS
    ask_tool = next(t for t in got["tools"] if t.name == "ask")
    assert {"status", "citations", "reason", "related"} <= set(ask_tool.output_schema["properties"])
    [listed] = got["kbs"].structured_content["knowledge_bases"]
    assert listed["name"] == "docs" and listed["documents"] == 10 and listed["chunks"] > 10

    answer = got["answer"]
    data = answer.structured_content
    assert not answer.is_error and data["status"] == "answered" and "[1]" in data["answer"]
    assert isinstance(data["query_id"], int)  # a local store: the log row is the caller's own
    text, links = answer.content[0].text, answer.content[1:]
    assert text.startswith(data["answer"]) and "Sources:" in text
    assert [link.uri for link in links] == [
        f"citewise://docs/passages/{c['chunk_id']}" for c in data["citations"]]
    store = open_store(str(stdio_db))
    chunk = store.chunk_by_id(store.get_kb("docs"), data["citations"][0]["chunk_id"])
    store.close()
    assert chunk.text in got["passage"].contents[0].text
    assert [t.uri_template for t in got["templates"]] == ["citewise://{kb}/passages/{chunk_id}"]

    refusal = got["refusal"]
    assert not refusal.is_error and refusal.structured_content["status"] == "refused"
    assert refusal.content[0].text == f"Not answered: {refusal.structured_content['reason']}"
    assert refusal.structured_content["citations"] == [] and len(refusal.content) == 1

    chunks = got["found"].structured_content["chunks"]
    assert len(chunks) == 3 and all(c["text"] for c in chunks)
    assert "varenicline" in got["follow"].structured_content["standalone_question"].lower()


def test_stdio_serves_only_the_knowledge_bases_it_was_given(stdio_db: Path) -> None:
    async def steps(client: Client) -> tuple:
        kbs = await client.call_tool("list_knowledge_bases", {})
        other = await client.call_tool("ask", {"kb": "other", "question": COVERED})
        missing = await client.call_tool("ask", {"kb": "nowhere", "question": COVERED})
        empty = await client.call_tool("ask", {"kb": "docs", "question": "   "})
        return kbs, other, missing, empty

    kbs, other, missing, empty = call(stdio(stdio_db, "--kb", "docs"), steps)
    assert [k["name"] for k in kbs.structured_content["knowledge_bases"]] == ["docs"]
    assert other.is_error and other.content[0].text.endswith("No knowledge base named 'other'")
    assert missing.is_error and missing.content[0].text.endswith("No knowledge base named 'nowhere'")
    assert empty.is_error and "question is empty" in empty.content[0].text

    async def every(client: Client) -> Any:
        return await client.call_tool("list_knowledge_bases", {})
    listed = call(stdio(stdio_db), every).structured_content["knowledge_bases"]
    assert sorted(k["name"] for k in listed) == ["docs", "other"]  # no --kb: the whole store


def test_mcp_with_a_knowledge_base_that_does_not_exist_is_one_line_and_exit_1(stdio_db: Path) -> None:
    r = CliRunner().invoke(cli_app, ["--db", str(stdio_db), "mcp", "--kb", "nowhere"])
    assert r.exit_code != 0 and isinstance(r.exception, KnowledgeBaseError)


# -- streamable HTTP: /v1/mcp on a live service ----------------------------------------------

@pytest.fixture(scope="module", name="service")
def service_fixture(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict]:
    """A live service (tenant lanes: one running, none waiting) with two tenants, acme with
    ``docs`` and globex with ``secret``, and a widget key of acme's."""
    settings = settings_for(tmp_path_factory.mktemp("mcp-http") / "s.db", tenant_slots=1,
                            tenant_queue=0)
    app = make_app(settings)
    with serve(app) as url, httpx.Client(base_url=url, timeout=60) as client:
        acme, globex = tenant(client, "acme"), tenant(client, "globex")
        kb_with_sample(client, acme)
        assert client.post("/v1/kbs", json={"name": "secret"}, headers=globex.headers).status_code == 201
        assert upload(client, globex, "secret", {"plans.md": SECRET})["status"] == 200
        widget = tenant(client, "acme", kind="widget", kb="docs", origins=["https://shop.example"])
        yield {"url": url, "app": app, "settings": settings, "acme": acme, "globex": globex,
               "widget": widget}


def http(service: dict, key: str, mode: str = "auto") -> Any:
    @asynccontextmanager
    async def factory() -> AsyncIterator[Client]:
        async with (httpx2.AsyncClient(headers={"Authorization": f"Bearer {key}"}, timeout=60) as session,
                    Client(streamable_http_client(service["url"] + ROUTE, http_client=session),
                           mode=mode) as client):
            yield client
    return factory


@pytest.mark.parametrize("mode", ["auto", "legacy"])
def test_http_lists_and_calls_the_tools_of_the_keys_tenant_only(service: dict, mode: str) -> None:
    async def steps(client: Client) -> dict:
        answer = await client.call_tool("ask", {"kb": "docs", "question": COVERED})
        return {
            "tools": (await client.list_tools()).tools,
            "kbs": await client.call_tool("list_knowledge_bases", {}),
            "answer": answer,
            "passage": await client.read_resource(answer.content[1].uri),
            "refusal": await client.call_tool("ask", {"kb": "docs", "question": OUT_OF_SCOPE}),
            "found": await client.call_tool("search", {"kb": "docs", "query": "withdrawal"}),
            "theirs": await client.call_tool("ask", {"kb": "secret", "question": COVERED}),
            "missing": await client.call_tool("ask", {"kb": "nowhere", "question": COVERED}),
            "their_search": await client.call_tool("search", {"kb": "secret", "query": "x"}),
        }

    got = call(http(service, service["acme"].key, mode), steps)
    assert {t.name for t in got["tools"]} == TOOLS
    assert [k["name"] for k in got["kbs"].structured_content["knowledge_bases"]] == ["docs"]
    data = got["answer"].structured_content
    assert data["status"] == "answered" and data["citations"] and data["query_id"] is None
    assert data["feedback_token"]
    assert "Varenicline" in got["passage"].contents[0].text
    assert got["refusal"].structured_content["status"] == "refused" and not got["refusal"].is_error
    assert got["found"].structured_content["chunks"]
    # another tenant's knowledge base reads exactly like one that does not exist
    assert got["theirs"].is_error and got["missing"].is_error
    assert (got["theirs"].content[0].text.replace("'secret'", "'X'")
            == got["missing"].content[0].text.replace("'nowhere'", "'X'"))
    assert got["their_search"].is_error


def test_http_passages_of_another_tenant_cannot_be_read(service: dict) -> None:
    async def theirs(client: Client) -> Any:
        answer = await client.call_tool("ask", {"kb": "secret", "question": COVERED})
        return answer.structured_content["citations"][0]["chunk_id"]
    chunk_id = call(http(service, service["globex"].key), theirs)

    async def read(client: Client) -> Any:
        for uri in (f"citewise://secret/passages/{chunk_id}", f"citewise://docs/passages/{chunk_id}"):
            with pytest.raises(MCPError, match="No (knowledge base named 'secret'|passage)"):
                await client.read_resource(uri)
    call(http(service, service["acme"].key), read)


def announced(url: str, headers: dict[str, str], length: int, sent: bytes) -> tuple[int, dict]:
    """POST ``sent`` after announcing ``length`` bytes (more): only a server that answers
    without reading the body answers at all."""
    host, port = url.removeprefix("http://").split(":")
    head = "".join(f"{k}: {v}\r\n" for k, v in headers.items())
    with socket.create_connection((host, int(port)), timeout=20) as sock:
        sock.sendall(f"POST {ROUTE} HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
                     f"Accept: application/json, text/event-stream\r\n{head}"
                     f"Content-Length: {length}\r\n\r\n".encode() + sent)
        data = b""
        while b"\r\n\r\n" not in data or not data.rstrip().endswith(b"}"):
            block = sock.recv(65536)
            if not block:
                break
            data += block
    status_line, _, body = data.partition(b"\r\n\r\n")
    return int(status_line.split()[1]), json.loads(body)


def test_http_needs_a_tenant_key_checked_before_the_body(service: dict) -> None:
    widget = {"Authorization": f"Bearer {service['widget'].key}", "Origin": "https://shop.example"}
    for headers, status in (({}, 401), ({"Authorization": "Bearer cw_not-a-key"}, 401), (widget, 403)):
        got, body = announced(service["url"], headers, 5000, b'{"jsonrpc": "2.0", ')
        assert got == status and body["detail"], body
    limit = service["settings"].max_body_bytes
    got, body = announced(service["url"], {"Authorization": f"Bearer {service['acme'].key}"},
                          limit + 1, b"{")
    assert got == 413 and f"limit of {limit:,} bytes" in body["detail"]


def test_http_asks_run_in_the_tenants_compute_lane(service: dict) -> None:
    """acme's only lane is taken (and no waiting allowed): its ask is refused as busy at once,
    while globex, whose lane is free, is answered."""
    services = service["app"].state.services[service["settings"].db]
    acme_id = services.tenants().key_for_token(service["acme"].key).tenant_id

    async def ask_docs(client: Client) -> Any:
        return await client.call_tool("ask", {"kb": "docs", "question": COVERED})

    async def ask_secret(client: Client) -> Any:
        return await client.call_tool("ask", {"kb": "secret", "question": COVERED})

    with services.compute.hold(acme_id):
        busy = call(http(service, service["acme"].key), ask_docs)
        free = call(http(service, service["globex"].key), ask_secret)
    assert busy.is_error and "Too many requests of this tenant at once" in busy.content[0].text
    assert not free.is_error and free.structured_content["status"] == "answered"


def test_http_search_with_a_nul_is_the_http_apis_clear_error(
        service: dict, caplog: pytest.LogCaptureFixture) -> None:
    """Issue 28: the tool logged a traceback and answered "Error executing tool"."""
    acme = service["acme"]
    query = "dose\x00schedule"
    with httpx.Client(base_url=service["url"], timeout=30) as rest:
        r = rest.post("/v1/kbs/docs/search", json={"query": query}, headers=acme.headers)
    assert r.status_code == 422 and "NUL" in r.json()["detail"]

    async def search(client: Client) -> Any:
        return await client.call_tool("search", {"kb": "docs", "query": query})

    caplog.set_level(logging.INFO)
    got = call(http(service, acme.key), search)
    assert got.is_error and got.content[0].text.endswith(f": {r.json()['detail']}"), got.content
    assert "Traceback" not in caplog.text  # nor any warning: a caller's mistake, not a crash
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING], caplog.text


def test_stdio_search_with_a_nul_is_the_same_clear_error(stdio_db: Path) -> None:
    async def search(client: Client) -> Any:
        return await client.call_tool("search", {"kb": "docs", "query": "dose\x00schedule"})

    got = call(stdio(stdio_db), search)
    assert got.is_error and got.content[0].text == (
        "Error executing tool search: query: Value error, holds a NUL character, which cannot be "
        "stored; send UTF-8 text")


def test_http_get_is_405_not_a_stream_left_open(service: dict) -> None:
    """Issue 28: GET opened a server-to-client stream (the server sends none when stateless)
    that was never closed."""
    headers = {"Authorization": f"Bearer {service['acme'].key}", "Accept": "text/event-stream"}
    with httpx.Client(base_url=service["url"], timeout=5) as client:
        r = client.get(ROUTE, headers=headers)
    assert r.status_code == 405 and "POST" in r.headers["allow"], r.text
    assert r.json()["detail"]
