"""Hosted embedders through the real SDKs, transport mocked: requests, batching, splitting,
retries, and the dimension recorded on the knowledge base."""

from __future__ import annotations

import httpx
import numpy as np
import pytest

from citewise.embedders import REGISTRY, get_embedder
from citewise.embedders.remote import GeminiEmbedder, OpenAIEmbedder
from citewise.engine import Engine
from citewise.errors import ConfigError, DimensionMismatchError, EmbedderError
from citewise.kb import KBConfig
from tests.providers import Script, error, gemini_vectors, openai_vectors


@pytest.fixture(autouse=True)
def keys(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setenv("GEMINI_API_KEY", "gm-test")


def rows(n: int, dim: int, seed: int = 0) -> list[list[float]]:
    return np.random.default_rng(seed).normal(size=(n, dim)).round(4).tolist()


class Echo:
    """A provider that answers every embedding request with one vector per input."""

    def __init__(self, dim: int, gemini: bool = False) -> None:
        self.dim, self.gemini, self.bodies = dim, gemini, []  # type: ignore[var-annotated]

    def handle(self, request: httpx.Request) -> httpx.Response:
        import json

        body = json.loads(request.content)
        self.bodies.append(body)
        n = len(body["requests"] if self.gemini else body["input"])
        return (gemini_vectors if self.gemini else openai_vectors)(rows(n, self.dim, len(self.bodies)))

    def client(self) -> httpx.Client:
        return httpx.Client(transport=httpx.MockTransport(self.handle))


def test_openai_request_and_normalised_vectors() -> None:
    script = Script(openai_vectors(rows(2, 3072)))
    emb = OpenAIEmbedder("text-embedding-3-large", http_client=script.client(), sleep=script.sleep)
    v = emb.embed(["nicotine patch", "varenicline dose"])
    assert v.shape == (2, 3072) and emb.dim == 3072 and emb.name == "openai:text-embedding-3-large"
    assert np.allclose(np.linalg.norm(v, axis=1), 1.0)
    assert str(script.requests[0].url) == "https://api.openai.com/v1/embeddings"
    assert script.body() == {"model": "text-embedding-3-large", "encoding_format": "float",
                             "input": ["nicotine patch", "varenicline dose"]}


@pytest.mark.heavy
def test_gemini_request_batches_of_100() -> None:
    echo = Echo(768, gemini=True)
    emb = GeminiEmbedder("text-embedding-004", http_client=echo.client(), sleep=lambda s: None)
    v = emb.embed([f"text {i}" for i in range(250)])
    assert v.shape == (250, 768)
    assert [len(b["requests"]) for b in echo.bodies] == [100, 100, 50]
    assert echo.bodies[0]["requests"][0] == {
        "content": {"parts": [{"text": "text 0"}], "role": "user"}, "model": "models/text-embedding-004"}


def test_openai_batches_by_count_and_by_tokens() -> None:
    emb = OpenAIEmbedder("text-embedding-3-small")
    assert [len(b) for b in emb.batches([f"t{i}" for i in range(2049)])] == [2048, 1]
    big = "word " * 4000  # ~6,700 estimated tokens each: 44 fit the 300,000-token budget
    assert [len(b) for b in emb.batches([big] * 50)] == [44, 6]


def test_long_texts_are_split_at_sentences_and_averaged_never_cut() -> None:
    echo = Echo(768, gemini=True)
    emb = GeminiEmbedder("text-embedding-004", http_client=echo.client())
    sentence = "Nicotine withdrawal symptoms peak within the first week of quitting. "
    long = sentence * 200  # ~14,000 characters, past 2,048 tokens of 3 characters
    v = emb.embed([long, "short"])
    sent = [r["content"]["parts"][0]["text"] for b in echo.bodies for r in b["requests"]]
    assert len(sent) > 2 and all(emb.count_tokens(t) <= 2048 for t in sent)
    assert "".join(sent[:-1]).replace(" ", "") == long.replace(" ", "")  # every word sent once
    assert v.shape == (2, 768)


def test_embedding_faults_retry_then_fail_clearly() -> None:
    script = Script(error(429, {"retry-after": "5"}), error(500), openai_vectors(rows(1, 3072)))
    emb = OpenAIEmbedder("text-embedding-3-large", http_client=script.client(), sleep=script.sleep)
    assert emb.embed(["x"]).shape == (1, 3072)
    assert script.sleeps == [5.0, 2.0]
    script = Script(openai_vectors(rows(1, 3072)))  # asked for 2, got 1
    emb = OpenAIEmbedder("text-embedding-3-large", http_client=script.client(), sleep=script.sleep)
    with pytest.raises(EmbedderError, match="failed after 4 attempts: asked for 2 vectors, got 1"):
        emb.embed(["x", "y"])
    script = Script(httpx.ReadTimeout)
    emb = GeminiEmbedder("text-embedding-004", http_client=script.client(), sleep=script.sleep)
    with pytest.raises(EmbedderError, match="timed out"):
        emb.embed(["x"])


def test_a_model_that_changes_dimension_is_refused() -> None:
    script = Script(openai_vectors(rows(1, 1024)))
    emb = OpenAIEmbedder("text-embedding-3-large", http_client=script.client())
    with pytest.raises(DimensionMismatchError, match="1024-dimensional vectors where 3072"):
        emb.embed(["x"])


def test_compatible_server_dimension_is_probed_once(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY")
    echo = Echo(384)
    emb = OpenAIEmbedder("nomic-embed-text", base_url="http://localhost:11434/v1", compatible=True,
                         http_client=echo.client())
    assert emb.dim == 384 and emb.embed(["a", "b"]).shape == (2, 384)
    assert emb.name == "openai-compatible:http://localhost:11434/v1#nomic-embed-text"
    assert [b["input"] for b in echo.bodies] == [["dimension probe"], ["a", "b"]]


def test_specs(monkeypatch: pytest.MonkeyPatch) -> None:
    assert {"local", "hashing", "openai", "gemini", "openai-compatible"} <= set(REGISTRY)
    assert get_embedder("gemini:text-embedding-004").dim == 768
    monkeypatch.delenv("OPENAI_API_KEY")
    with pytest.raises(ConfigError, match="OPENAI_API_KEY"):
        get_embedder("openai:text-embedding-3-small")


def test_a_question_embedded_with_another_dimension_is_refused(engine: Engine) -> None:
    kb = engine.store.create_kb("k", KBConfig(embedder="hashing:64", dim=128))
    match = "64-dimensional question vector; knowledge base 'k' holds 128"
    with pytest.raises(DimensionMismatchError, match=match):
        engine.ask(kb, "How long does withdrawal last?")
