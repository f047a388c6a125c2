"""Hostile and failing providers against the HTTP service (issue 13, items 1 and 2).

A provider here is a real HTTP server on loopback, reached through the real ``openai`` and
``google-genai`` SDKs: it records every connection, answers embeddings and chat completions,
and can be told to fail (500 with a secret-looking body) or to sleep before answering.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import numpy as np
import pytest
from fastapi.testclient import TestClient

from citewise import hosted
from citewise.embedders.remote import GeminiEmbedder, OpenAIEmbedder
from citewise.engine import Engine
from citewise.errors import EmbedderError, GenerationError
from citewise.generators.gemini_api import GeminiGenerator
from citewise.generators.openai_api import OpenAIGenerator
from citewise.kb import KBConfig
from citewise.records import Candidate, Chunk
from citewise.stores.sqlite import open_sqlite
from tests.api_fixtures import COVERED, make_app, sample_files, settings_for, tenant, upload

pytestmark = pytest.mark.heavy  # servers, processes, deadlines or megabytes: make test, not make unit

SECRET = "internal-admin-page SECRET-TOKEN-4242"
OPERATOR_KEY = "sk-operator-secret-do-not-leak"
DIM = 16


class Provider:
    """An OpenAI-compatible (and Gemini-shaped) provider on 127.0.0.1."""

    def __init__(self) -> None:
        self.connections = 0
        self.requests: list[tuple[str, str | None]] = []  # path, Authorization
        self.fail_embeddings = self.fail_chat = False
        self.delay = 0.0
        self.sleeping = 0
        self.release = threading.Event()
        provider = self

        class Handler(BaseHTTPRequestHandler):
            def setup(self) -> None:
                provider.connections += 1
                super().setup()

            def log_message(self, *args: object) -> None:
                pass

            def do_POST(self) -> None:  # noqa: N802
                body = json.loads(self.rfile.read(int(self.headers.get("content-length", 0))) or b"{}")
                provider.requests.append((self.path, self.headers.get("authorization")))
                if provider.delay:
                    provider.sleeping += 1
                    provider.release.wait(provider.delay)
                chat = "chat/completions" in self.path or "generateContent" in self.path
                if (provider.fail_chat if chat else provider.fail_embeddings):
                    return self.reply(500, {"error": {"message": SECRET, "type": "server_error"}})
                if chat:
                    return self.reply(200, {"id": "c", "object": "chat.completion", "created": 1,
                                            "model": "m", "choices": [{"index": 0, "finish_reason": "stop",
                                            "message": {"role": "assistant", "content": "Yes [1]."}}]})
                texts = body.get("input") or [r["content"]["parts"][0]["text"]
                                              for r in body.get("requests", [])]
                rows = [self.vector(t) for t in texts]
                if "input" in body:
                    return self.reply(200, {"object": "list", "model": "m", "data": [
                        {"object": "embedding", "index": i, "embedding": r} for i, r in enumerate(rows)]})
                return self.reply(200, {"embeddings": [{"values": r} for r in rows]})

            @staticmethod
            def vector(text: str) -> list[float]:
                seed = int(hashlib.sha256(text.encode()).hexdigest()[:8], 16)
                return np.random.default_rng(seed).normal(size=DIM).round(4).tolist()

            def reply(self, status: int, data: dict) -> None:
                raw = json.dumps(data).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(raw)))
                self.end_headers()
                with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                    self.wfile.write(raw)  # unless the caller gave up at its deadline

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}/v1"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.release.set()
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture(name="provider")
def provider_fixture(monkeypatch: pytest.MonkeyPatch) -> Iterator[Provider]:
    p = Provider()
    # the operator's keys, and the SDKs' default endpoints pointed at the listener, so that a
    # call made with an openai: or gemini: spec would arrive there too
    for name in ("OPENAI_COMPATIBLE_API_KEY", "OPENAI_API_KEY", "GEMINI_API_KEY"):
        monkeypatch.setenv(name, OPERATOR_KEY)
    monkeypatch.setenv("OPENAI_BASE_URL", p.url)
    monkeypatch.setenv("GOOGLE_GEMINI_BASE_URL", f"http://127.0.0.1:{p.port}/")
    yield p
    p.close()


def leaks(text: str, provider: Provider) -> list[str]:
    return [s for s in (SECRET, "SECRET", OPERATOR_KEY, "127.0.0.1", str(provider.port), "/v1")
            if s in text]


def test_a_tenant_cannot_point_a_knowledge_base_at_a_url(tmp_path: Path, provider: Provider) -> None:
    hostile = [f"openai-compatible:{provider.url}#m", f"openai-compatible:http://localhost:{provider.port}/v1#m",
               "openai:text-embedding-3-small", "gemini:text-embedding-004"]
    with TestClient(make_app(settings_for(tmp_path / "s.db"))) as client:
        eve = tenant(client, "eve")
        for i, spec in enumerate(hostile):
            r = client.post("/v1/kbs", json={"name": f"x{i}", "embedder": spec}, headers=eve.headers)
            assert r.status_code == 422, (spec, r.text)
            assert r.json()["detail"].endswith("Allowed embedders: hashing:256."), r.text
            r = client.post("/v1/kbs", json={"name": f"g{i}", "generator": spec}, headers=eve.headers)
            assert r.status_code == 422 and r.json()["detail"].endswith("Allowed generators: extractive.")
            # nothing was made that ingest or ask could reach
            assert upload(client, eve, f"x{i}", sample_files())["status"] == 404
            r = client.post(f"/v1/kbs/x{i}/ask", json={"question": COVERED}, headers=eve.headers)
            assert r.status_code == 404
        # an allowed knowledge base takes no provider from the query or the body either
        assert client.post("/v1/kbs", json={"name": "docs", "embedder": "hashing:256"},
                           headers=eve.headers).status_code == 201
        assert upload(client, eve, "docs", sample_files())["status"] == 200
        r = client.post("/v1/kbs/docs/ask", params={"generator": hostile[0], "embedder": hostile[0]},
                        json={"question": COVERED}, headers=eve.headers)
        assert r.status_code == 200 and r.json()["status"] == "answered"
        r = client.post("/v1/kbs/docs/ask", json={"question": COVERED, "generator": hostile[0]},
                        headers=eve.headers)
        assert r.status_code == 422
    assert provider.connections == 0 and provider.requests == []


def test_a_stored_knowledge_base_with_a_url_is_refused_before_any_call(
        tmp_path: Path, provider: Provider) -> None:
    """Knowledge bases made before the allowlist (or by the CLI) with a provider the server does
    not allow: asking, searching or uploading calls nothing."""
    db = tmp_path / "s.db"
    with TestClient(make_app(settings_for(db))) as client:
        eve = tenant(client, "eve")
        store = open_sqlite(db)
        try:
            owner = store.tenants.get_tenant("eve").id
            for name, config in (
                    ("emb", KBConfig(embedder=f"openai-compatible:{provider.url}#m", dim=DIM)),
                    ("gen", KBConfig(embedder="hashing:256", dim=256,
                                     generator=f"openai-compatible:{provider.url}#m"))):
                store.create_kb(name, config, tenant=owner)
            Engine(store).ingest(store.get_kb("gen", tenant=owner),
                                 [p for p in sorted((Path(__file__).parent.parent / "examples"
                                                     / "smoking-cessation").glob("*.md"))])
        finally:
            store.close()
        for name in ("emb", "gen"):
            r = client.post(f"/v1/kbs/{name}/ask", json={"question": COVERED}, headers=eve.headers)
            assert r.status_code == 422, r.text
            assert "not allowed on this server" in r.json()["detail"] and not leaks(r.text, provider)
            r = client.post(f"/v1/kbs/{name}/ask?stream=true", json={"question": COVERED},
                            headers=eve.headers)
            assert r.status_code == 422
            r = client.post(f"/v1/kbs/{name}/search", json={"query": COVERED}, headers=eve.headers)
            assert r.status_code == 422
            assert upload(client, eve, name, {"new.md": b"# New\n\nSome text."})["status"] == 422
        # it can still be looked at and deleted
        assert client.delete("/v1/kbs/emb", headers=eve.headers).status_code == 204
    assert provider.connections == 0 and provider.requests == []


def test_a_failing_allowed_provider_tells_the_caller_nothing_of_it(
        tmp_path: Path, provider: Provider, caplog: pytest.LogCaptureFixture) -> None:
    spec = f"openai-compatible:{provider.url}#m"
    settings = settings_for(tmp_path / "s.db", embedders=[spec], generators=["extractive", spec],
                            provider_deadline_s=1.0)
    with TestClient(make_app(settings)) as client:
        acme = tenant(client, "acme")
        assert client.post("/v1/kbs", json={"name": "hosted", "embedder": spec},
                           headers=acme.headers).status_code == 201
        assert upload(client, acme, "hosted", sample_files())["status"] == 200
        provider.fail_embeddings = True
        asked = len(provider.requests)

        r = client.post("/v1/kbs/hosted/ask", json={"question": COVERED}, headers=acme.headers)
        assert r.status_code == 503 and not leaks(r.text, provider), r.text
        assert r.json() == {"detail": "the embedding provider failed; try again later"}
        r = client.post("/v1/kbs/hosted/ask?stream=true", json={"question": COVERED},
                        headers=acme.headers)
        assert "event: error" in r.text and not leaks(r.text, provider), r.text
        assert "the embedding provider failed" in r.text
        r = client.post("/v1/kbs/hosted/documents?wait=true", headers=acme.headers,
                        files=[("files", ("new.md", b"# New\n\nVarenicline is taken daily."))])
        assert r.status_code == 503 and not leaks(r.text, provider), r.text
        # a generator that fails: a refusal that says so, without the provider's words
        r = client.post("/v1/kbs", json={"name": "chat", "generator": spec}, headers=acme.headers)
        assert r.status_code == 201 and r.json()["generator"] == spec
        assert upload(client, acme, "chat", sample_files())["status"] == 200
        provider.fail_chat = True
        r = client.post("/v1/kbs/chat/ask", json={"question": COVERED}, headers=acme.headers)
        data = r.json()
        assert data["status"] == "refused" and data["path"] == "generation_failed"
        assert "the generation provider failed; try again later" in data["reason"]
        assert not leaks(r.text, provider)
    assert len(provider.requests) > asked  # the provider was called, and answered with the secret
    assert {auth for _, auth in provider.requests} == {f"Bearer {OPERATOR_KEY}"}
    assert SECRET in caplog.text  # the operator can read what happened in the log


@pytest.mark.timeout(90)
def test_a_slow_provider_stalls_only_its_own_tenant(tmp_path: Path, provider: Provider) -> None:
    spec = f"openai-compatible:{provider.url}#m"
    settings = settings_for(tmp_path / "s.db", embedders=[spec], provider_deadline_s=3.0,
                            compute_slots=1, tenant_slots=1, tenant_queue=2)
    with TestClient(make_app(settings)) as client:
        slow, fast = tenant(client, "slow"), tenant(client, "fast", rate_per_minute=10_000)
        assert client.post("/v1/kbs", json={"name": "kb", "embedder": spec},
                           headers=slow.headers).status_code == 201
        assert upload(client, slow, "kb", sample_files())["status"] == 200
        assert client.post("/v1/kbs", json={"name": "kb"}, headers=fast.headers).status_code == 201
        assert upload(client, fast, "kb", sample_files())["status"] == 200
        provider.delay = 20.0  # every provider call from now on takes 20 s
        results: list[tuple[int, float, float]] = []

        def ask_slow() -> None:
            t = time.monotonic()
            r = client.post("/v1/kbs/kb/ask", json={"question": COVERED}, headers=slow.headers)
            results.append((r.status_code, time.monotonic() - t, time.monotonic()))

        threads = [threading.Thread(target=ask_slow) for _ in range(3)]
        for thread in threads:
            thread.start()
        until = time.monotonic() + 5
        while not provider.sleeping and time.monotonic() < until:
            time.sleep(0.01)
        assert provider.sleeping
        time.sleep(0.3)  # the other two are waiting for the tenant's one lane
        t = time.monotonic()
        r = client.post("/v1/kbs/kb/ask", json={"question": COVERED}, headers=fast.headers)
        fast_done = time.monotonic()
        assert r.status_code == 200 and r.json()["status"] == "answered"
        assert fast_done - t < 1.5  # far below the provider's 20 s and the deadline
        t = time.monotonic()
        r = client.post("/v1/kbs/kb/ask", json={"question": COVERED}, headers=slow.headers)
        assert r.status_code == 429 and r.headers["Retry-After"] == "1"
        assert "Too many requests of this tenant at once" in r.json()["detail"]
        assert time.monotonic() - t < 1.0  # refused at once, not queued
        for thread in threads:
            thread.join()
    # the first gave up at the deadline; the queued ones too, or found no lane within it (429)
    statuses = sorted(status for status, _, _ in results)
    assert statuses[-1] == 503 and set(statuses) <= {429, 503}, statuses
    assert fast_done < min(done for _, _, done in results)  # the other tenant finished first
    # each slow ask gave up at its 3 s deadline (one after another in its one lane), long
    # before the provider would have answered
    assert max(spent for _, spent, _ in results) < 12.0


@pytest.mark.timeout(30)
@pytest.mark.parametrize("kind", ["openai-embedder", "gemini-embedder", "openai-generator",
                                  "gemini-generator"])
def test_every_sdk_gives_up_at_the_deadline(kind: str, provider: Provider) -> None:
    provider.delay = 8.0
    context = [Candidate(Chunk("d", 0, ("H",), "Some text.", "T"), cosine=0.9)]
    calls = {
        "openai-embedder": lambda: OpenAIEmbedder("m", base_url=provider.url,
                                                  compatible=True).embed(["x"]),
        "gemini-embedder": lambda: GeminiEmbedder("text-embedding-004").embed(["x"]),
        "openai-generator": lambda: OpenAIGenerator("m", base_url=provider.url,
                                                    compatible=True).generate("q?", context),
        "gemini-generator": lambda: GeminiGenerator("gemini-2.5-flash").generate("q?", context),
    }
    started = time.monotonic()
    with hosted.limits(deadline=1.0), pytest.raises((EmbedderError, GenerationError)) as failed:
        calls[kind]()
    assert time.monotonic() - started < 4.0  # the 1 s deadline, all attempts included
    assert "timed out" in str(failed.value) and provider.requests  # it did reach the provider
