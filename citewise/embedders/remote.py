"""Hosted embedders: ``openai:MODEL``, ``gemini:MODEL`` and ``openai-compatible:URL#MODEL``.

What they share lives in ``RemoteEmbedder``: texts longer than the provider reads are split at
sentences and their pieces' vectors averaged (never truncated; tokens are estimated at
``CHARS_PER_TOKEN`` characters each, on the safe side of English text), pieces are sent in
batches within the provider's limits, each batch goes through ``hosted.retrying`` (429 with
Retry-After, 5xx, timeouts, malformed bodies), and every vector's length is checked against
the model's dimension, which the knowledge base records when it is created.

    provider           batch           per text          dimension
    openai             2,048 inputs    8,191 tokens      text-embedding-3-large 3,072, -3-small 1,536
                       300,000 tokens a request
    gemini             100 inputs      2,048 tokens      text-embedding-004 768, gemini-embedding-001 3,072
    openai-compatible  32 inputs       2,048 tokens      asked of the server once (one probe text)
"""

from __future__ import annotations

import math
import time
from functools import cached_property
from typing import Any

import numpy as np

from citewise.embedders.base import mean_of_pieces, split_all, split_to_fit
from citewise.errors import DimensionMismatchError, EmbedderError
from citewise.hosted import (
    Fault,
    Sleep,
    Unusable,
    api_key,
    compatible_spec,
    model_name,
    request_timeout,
    retrying,
)
from citewise.hosted.clients import (
    COMPATIBLE_KEYS,
    GEMINI_KEYS,
    OPENAI_KEYS,
    classify_gemini,
    classify_openai,
    gemini_client,
    openai_client,
)

CHARS_PER_TOKEN = 3
DIMENSIONS = {
    "text-embedding-3-large": 3072, "text-embedding-3-small": 1536, "text-embedding-ada-002": 1536,
    "text-embedding-004": 768, "gemini-embedding-001": 3072,
}


class RemoteEmbedder:
    """Splitting, batching, retries and dimension checks around one provider call."""

    name: str
    model: str
    max_tokens: int
    batch_size: int
    batch_tokens: int = 10**9

    def __init__(self, sleep: Sleep = time.sleep) -> None:
        self.sleep = sleep

    def _call(self, texts: list[str]) -> list[list[float]]:
        """One request: a vector per text, in order."""
        raise NotImplementedError

    def classify(self, e: BaseException) -> Fault | None:
        raise NotImplementedError

    @cached_property
    def dim(self) -> int:
        known = DIMENSIONS.get(self.model)
        return known if known else len(self._batch(["dimension probe"], check_dim=False)[0])

    def count_tokens(self, text: str) -> int:
        return math.ceil(len(text) / CHARS_PER_TOKEN)

    def _batch(self, texts: list[str], check_dim: bool = True) -> list[list[float]]:
        def call() -> list[list[float]]:
            rows = self._call(texts)
            if len(rows) != len(texts) or any(not r for r in rows):
                raise Unusable(f"asked for {len(texts)} vectors, got {len(rows)} (or an empty one)")
            return rows

        rows = retrying(call, self.classify, EmbedderError, self.name, self.sleep)
        sizes = {len(r) for r in rows}
        if check_dim and sizes != {self.dim}:
            raise DimensionMismatchError(
                f"{self.name} returned {'/'.join(map(str, sorted(sizes)))}-dimensional vectors where "
                f"{self.dim} were expected; the model behind the spec changed. Use a new knowledge "
                "base for a different model."
            )
        return rows

    def batches(self, pieces: list[str]) -> list[list[str]]:
        """Consecutive groups within the provider's input count and token budget."""
        out: list[list[str]] = [[]]
        used = 0
        for p in pieces:
            n = self.count_tokens(p)
            if out[-1] and (len(out[-1]) == self.batch_size or used + n > self.batch_tokens):
                out.append([])
                used = 0
            out[-1].append(p)
            used += n
        return [b for b in out if b]

    def embed(self, texts: list[str], *, progress: bool = False) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        if empty := [i for i, t in enumerate(texts) if not t.strip()]:
            raise EmbedderError(f"{self.name} cannot embed an empty text (input {empty[0]})")
        pieces, owner = split_all(texts, lambda t: split_to_fit(t, self.count_tokens, self.max_tokens))
        rows = [row for batch in self.batches(pieces) for row in self._batch(batch)]
        return mean_of_pieces(np.asarray(rows, dtype=np.float32), owner, len(texts), self.name)


class OpenAIEmbedder(RemoteEmbedder):
    batch_tokens = 300_000

    def __init__(self, model: str, *, base_url: str | None = None, compatible: bool = False,
                 http_client: Any = None, sleep: Sleep = time.sleep) -> None:
        super().__init__(sleep)
        self.model, self.base_url, self.compatible = model, base_url, compatible
        self.keys = COMPATIBLE_KEYS if compatible else OPENAI_KEYS
        self.key = api_key("OpenAI", self.keys, required=not compatible) or "not-needed"
        self.name = f"openai-compatible:{base_url}#{model}" if compatible else f"openai:{model}"
        self.max_tokens = 2048 if compatible else 8191
        self.batch_size = 32 if compatible else 2048
        self.http_client = http_client

    def classify(self, e: BaseException) -> Fault | None:
        return classify_openai(e, self.keys)

    @cached_property
    def client(self) -> Any:
        return openai_client(self.key, self.base_url, self.http_client)

    def _call(self, texts: list[str]) -> list[list[float]]:
        timeout = request_timeout()
        response = self.client.embeddings.create(model=self.model, input=texts, encoding_format="float",
                                                 **({} if timeout is None else {"timeout": timeout}))
        return [list(d.embedding) for d in sorted(response.data, key=lambda d: d.index)]


class GeminiEmbedder(RemoteEmbedder):
    max_tokens = 2048
    batch_size = 100

    def __init__(self, model: str, *, http_client: Any = None, sleep: Sleep = time.sleep) -> None:
        super().__init__(sleep)
        self.model = model
        self.key = api_key("Gemini", GEMINI_KEYS)
        self.name = f"gemini:{model}"
        self.http_client = http_client

    def classify(self, e: BaseException) -> Fault | None:
        return classify_gemini(e)

    @cached_property
    def client(self) -> Any:
        return gemini_client(self.key or "", self.http_client)

    def _call(self, texts: list[str]) -> list[list[float]]:
        from google.genai import types

        timeout = request_timeout()
        config = None if timeout is None else types.EmbedContentConfig(
            http_options=types.HttpOptions(timeout=math.ceil(timeout * 1000)))
        result = self.client.models.embed_content(model=self.model, contents=texts, config=config)
        return [list(e.values or []) for e in (result.embeddings or [])]


def openai_from_spec(arg: str) -> OpenAIEmbedder:
    """``openai:MODEL`` (``OPENAI_API_KEY``)."""
    return OpenAIEmbedder(model_name("embedder", "openai", arg, "text-embedding-3-large"))


def compatible_from_spec(arg: str) -> OpenAIEmbedder:
    """``openai-compatible:URL#MODEL``: a server speaking OpenAI's embeddings API."""
    url, model = compatible_spec("embedder", arg)
    return OpenAIEmbedder(model, base_url=url, compatible=True)


def gemini_from_spec(arg: str) -> GeminiEmbedder:
    """``gemini:MODEL`` (``GEMINI_API_KEY`` or ``GOOGLE_API_KEY``)."""
    return GeminiEmbedder(model_name("embedder", "gemini", arg, "text-embedding-004"))
