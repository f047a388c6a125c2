"""Every built-in provider passes ``citewise.testing.providers``: the hosted ones through their
real SDKs behind a mocked transport that answers by what was sent, the local model for real."""

from __future__ import annotations

import hashlib
import json

import httpx
import numpy as np
import pytest

from citewise.embedders.hashing import HashingEmbedder
from citewise.embedders.remote import GeminiEmbedder, OpenAIEmbedder
from citewise.generators.extractive import ExtractiveGenerator
from citewise.generators.gemini_api import GeminiGenerator
from citewise.generators.openai_api import OpenAIGenerator
from citewise.generators.scripted import ScriptedGenerator
from citewise.testing.providers import EmbedderConformance, GeneratorConformance
from tests.providers import (
    gemini_chat,
    gemini_reply,
    gemini_vectors,
    openai_chat,
    openai_stream,
    openai_vectors,
    sse,
)

DRAFT = "Withdrawal symptoms peak in the first week [1]. They fade over two to four weeks [1]."


def row(text: str, dim: int) -> list[float]:
    """A vector of the model's size that depends on the text only, as a model's does."""
    seed = int.from_bytes(hashlib.sha256(text.encode()).digest()[:4], "little")
    return np.random.default_rng(seed).standard_normal(dim).tolist()


def client(handle) -> httpx.Client:
    return httpx.Client(transport=httpx.MockTransport(handle))


def openai_embeddings(request: httpx.Request) -> httpx.Response:
    return openai_vectors([row(t, 1536) for t in json.loads(request.content)["input"]])


def gemini_embeddings(request: httpx.Request) -> httpx.Response:
    texts = [r["content"]["parts"][0]["text"] for r in json.loads(request.content)["requests"]]
    return gemini_vectors([row(t, 768) for t in texts])


def openai_drafts(request: httpx.Request) -> httpx.Response:
    streamed = json.loads(request.content).get("stream")
    return openai_stream([DRAFT[:30], DRAFT[30:]]) if streamed else openai_chat(DRAFT)


def gemini_drafts(request: httpx.Request) -> httpx.Response:
    if "streamGenerateContent" in str(request.url):
        return sse([gemini_reply(DRAFT[:30]), gemini_reply(DRAFT[30:])])
    return gemini_chat(DRAFT)


@pytest.fixture(autouse=True)
def keys(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setenv("GEMINI_API_KEY", "test")


class TestHashingEmbedder(EmbedderConformance):
    @pytest.fixture
    def embedder(self):
        return HashingEmbedder(64)


class TestOpenAIEmbedder(EmbedderConformance):
    @pytest.fixture
    def embedder(self):
        return OpenAIEmbedder("text-embedding-3-small", http_client=client(openai_embeddings),
                              sleep=lambda s: None)


class TestGeminiEmbedder(EmbedderConformance):
    @pytest.fixture
    def embedder(self):
        return GeminiEmbedder("text-embedding-004", http_client=client(gemini_embeddings),
                              sleep=lambda s: None)


@pytest.mark.model
class TestLocalEmbedder(EmbedderConformance):
    @pytest.fixture
    def embedder(self):
        from citewise.embedders import get_embedder

        return get_embedder("local:all-MiniLM-L6-v2")


class TestExtractiveGenerator(GeneratorConformance):
    @pytest.fixture
    def generator(self):
        return ExtractiveGenerator(HashingEmbedder(64))


class TestScriptedGenerator(GeneratorConformance):
    @pytest.fixture
    def generator(self):
        return ScriptedGenerator(DRAFT)


class TestOpenAIGenerator(GeneratorConformance):
    @pytest.fixture
    def generator(self):
        return OpenAIGenerator("gpt-4o-mini", http_client=client(openai_drafts), sleep=lambda s: None)


class TestGeminiGenerator(GeneratorConformance):
    @pytest.fixture
    def generator(self):
        return GeminiGenerator("gemini-2.5-flash", http_client=client(gemini_drafts), sleep=lambda s: None)
