"""Provider deadlines are total, and a caller that leaves stops its provider call (issue 28).

The provider here is a real HTTP server on loopback, reached through the real ``openai`` and
``google-genai`` SDKs. It drips every answer a byte at a time, status line and headers
included: each read gets a byte long before any per-read timeout trips, so only a deadline on
the whole exchange ends it (the full answer would take a minute). It notes when the caller
closed each connection (its next write fails).
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import pytest
from fastapi.testclient import TestClient

from citewise import hosted
from citewise.embedders.remote import OpenAIEmbedder
from citewise.errors import EmbedderError, GenerationError
from citewise.generators.gemini_api import GeminiGenerator
from citewise.generators.openai_api import OpenAIGenerator
from citewise.records import Candidate, Chunk
from tests.api_fixtures import COVERED, make_app, sample_files, settings_for, tenant, upload
from tests.live import serve

pytestmark = pytest.mark.heavy  # servers, processes, deadlines or megabytes: make test, not make unit

BYTE_EVERY = 0.05  # seconds between two bytes: a 1,200-byte answer takes a minute
PAD = " " * 1200  # whitespace JSON allows between tokens, to make each answer that long
CONTEXT = [Candidate(Chunk("d", 0, ("H",), "Some text.", "T"), cosine=0.9)]


def _chat(stream: bool) -> tuple[str, bytes]:
    if not stream:
        body = {"id": "c", "object": "chat.completion", "created": 1, "model": "m",
                "choices": [{"index": 0, "finish_reason": "stop",
                             "message": {"role": "assistant", "content": "Yes [1]."}}]}
        return "application/json", (json.dumps(body) + PAD).encode()
    events = [{"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "m",
               "choices": [{"index": 0, "delta": {"content": f"Sentence {i} of the answer [1]. "},
                            "finish_reason": None}]} for i in range(12)]
    text = "".join(f"data: {json.dumps(e)}{PAD[:100]}\n\n" for e in events) + "data: [DONE]\n\n"
    return "text/event-stream", text.encode()


class Drip:
    """An OpenAI-compatible (and Gemini-shaped) provider that answers a byte at a time."""

    def __init__(self) -> None:
        self.opened: list[float] = []  # when each request arrived
        self.closed: list[float] = []  # when a write found the caller gone
        drip = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def do_POST(self) -> None:  # noqa: N802
                body = json.loads(self.rfile.read(int(self.headers.get("content-length", 0))) or b"{}")
                drip.opened.append(time.monotonic())
                if "embeddings" in self.path:
                    kind, raw = "application/json", (json.dumps({
                        "object": "list", "model": "m",
                        "data": [{"object": "embedding", "index": 0, "embedding": [0.1] * 8}]})
                        + PAD).encode()
                elif "generateContent" in self.path:
                    kind, raw = "application/json", (json.dumps({"candidates": [{
                        "content": {"parts": [{"text": "Yes [1]."}], "role": "model"},
                        "finishReason": "STOP"}]}) + PAD).encode()
                else:
                    kind, raw = _chat(bool(body.get("stream")))
                head = (f"HTTP/1.1 200 OK\r\ncontent-type: {kind}\r\n"
                        f"content-length: {len(raw)}\r\n\r\n").encode()
                for i in range(len(head + raw)):
                    try:
                        self.wfile.write((head + raw)[i:i + 1])
                        self.wfile.flush()
                    except OSError:  # the caller closed the connection
                        drip.closed.append(time.monotonic())
                        return
                    time.sleep(BYTE_EVERY)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}/v1"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def wait_opened(self, n: int = 1, within: float = 20.0) -> None:
        until = time.monotonic() + within
        while len(self.opened) < n and time.monotonic() < until:
            time.sleep(0.01)
        assert len(self.opened) >= n, "the provider was never called"

    def wait_closed(self, within: float) -> float | None:
        """Seconds from now until the caller closed its connection, None if not ``within``."""
        start = time.monotonic()
        while not self.closed and time.monotonic() - start < within:
            time.sleep(0.01)
        return self.closed[0] - start if self.closed else None

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture(name="drip")
def drip_fixture(monkeypatch: pytest.MonkeyPatch) -> Iterator[Drip]:
    d = Drip()
    monkeypatch.setenv("OPENAI_COMPATIBLE_API_KEY", "sk-test")
    monkeypatch.setenv("GEMINI_API_KEY", "gm-test")
    monkeypatch.setenv("GOOGLE_GEMINI_BASE_URL", f"http://127.0.0.1:{d.port}/")
    yield d
    d.close()


CALLS: dict[str, Callable[[Drip], object]] = {
    "generate": lambda d: OpenAIGenerator("m", base_url=d.url, compatible=True).generate("q?", CONTEXT),
    "stream": lambda d: list(OpenAIGenerator("m", base_url=d.url, compatible=True).stream("q?", CONTEXT)),
    "embed": lambda d: OpenAIEmbedder("m", base_url=d.url, compatible=True).embed(["x"]),
    "gemini": lambda d: GeminiGenerator("gemini-2.5-flash").generate("q?", CONTEXT),
}


@pytest.mark.timeout(90)
@pytest.mark.parametrize("kind", list(CALLS))
def test_a_dripping_provider_is_cut_off_at_the_deadline(kind: str, drip: Drip) -> None:
    started = time.monotonic()
    with hosted.limits(deadline=2.0), pytest.raises((GenerationError, EmbedderError)) as failed:
        CALLS[kind](drip)
    assert time.monotonic() - started < 3.5  # the 2 s deadline, not the minute of the drip
    assert "timed out" in str(failed.value), failed.value
    assert drip.wait_closed(within=1.0) is not None  # and the connection was let go


@pytest.mark.timeout(90)
def test_an_ask_over_http_is_refused_at_the_deadline(tmp_path: Path, drip: Drip) -> None:
    spec = f"openai-compatible:{drip.url}#m"
    settings = settings_for(tmp_path / "s.db", generators=["extractive", spec],
                            provider_deadline_s=2.0)
    with TestClient(make_app(settings)) as client:
        acme = tenant(client, "acme")
        assert client.post("/v1/kbs", json={"name": "docs", "generator": spec},
                           headers=acme.headers).status_code == 201
        assert upload(client, acme, "docs", sample_files())["status"] == 200
        started = time.monotonic()
        r = client.post("/v1/kbs/docs/ask", json={"question": COVERED}, headers=acme.headers)
        spent = time.monotonic() - started
    assert r.status_code == 200 and r.json()["path"] == "generation_failed", r.text
    assert "the generation provider failed" in r.json()["reason"]
    assert spent < 4.0, spent


REQUESTS = {
    "ask": ("/v1/kbs/docs/ask", {"question": COVERED}),
    "ask-stream": ("/v1/kbs/docs/ask?stream=true", {"question": COVERED}),
    "chat-stream": ("/v1/chat/completions",
                    {"model": "docs", "stream": True, "messages": [{"role": "user", "content": COVERED}]}),
    "mcp": ("/v1/mcp", {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                        "params": {"name": "ask", "arguments": {"kb": "docs", "question": COVERED}}}),
}


@pytest.mark.timeout(120)
@pytest.mark.parametrize("route", list(REQUESTS))
def test_a_client_that_leaves_stops_the_provider_call(route: str, tmp_path: Path, drip: Drip) -> None:
    spec = f"openai-compatible:{drip.url}#m"
    settings = settings_for(tmp_path / "s.db", generators=["extractive", spec],
                            provider_deadline_s=60.0)
    app = make_app(settings)
    with serve(app) as url, httpx.Client(base_url=url, timeout=60) as setup:
        acme = tenant(setup, "acme")
        assert setup.post("/v1/kbs", json={"name": "docs", "generator": spec},
                          headers=acme.headers).status_code == 201
        assert upload(setup, acme, "docs", sample_files())["status"] == 200
        path, body = REQUESTS[route]
        raw = json.dumps(body).encode()
        port = int(url.rsplit(":", 1)[1])
        with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
            sock.sendall(f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                         f"Authorization: Bearer {acme.key}\r\nContent-Type: application/json\r\n"
                         "Accept: application/json, text/event-stream\r\n"
                         f"Content-Length: {len(raw)}\r\n\r\n".encode() + raw)
            drip.wait_opened()
            time.sleep(0.5)  # the provider is answering, a byte at a time
        # the client has gone: its provider call stops (not a minute later, when the drip ends)
        gone = drip.wait_closed(within=3.0)
        assert gone is not None, "the provider call went on after the client left"
