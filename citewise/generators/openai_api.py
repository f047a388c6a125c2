"""``openai:MODEL`` and ``openai-compatible:URL#MODEL`` (Ollama, vLLM, llama.cpp server).

One chat-completions request per question, carrying the prompt contract of ``prompts.py`` at
temperature 0.1; ``stream`` reads the same request as server-sent events. A response the
engine cannot use (no text, a content filter stop) is a fault like a 5xx or a timeout: retried
within ``hosted.ATTEMPTS``, then a ``GenerationError`` the engine turns into a refusal.
``condense`` makes a follow-up question standalone with one more request of the same kind
(``prompts.condense``).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from functools import cached_property, partial
from typing import Any

from citewise.errors import GenerationError
from citewise.generators import prompts
from citewise.generators.base import usable
from citewise.hosted import Sleep, Unusable, api_key, request_timeout, retrying, retrying_stream
from citewise.hosted.clients import COMPATIBLE_KEYS, OPENAI_KEYS, classify_openai, openai_client
from citewise.records import Candidate, Draft, Turn


class OpenAIGenerator:
    """Chat completions through the ``openai`` SDK, against OpenAI or a compatible server."""

    def __init__(self, model: str, *, base_url: str | None = None, compatible: bool = False,
                 temperature: float = prompts.TEMPERATURE, http_client: Any = None,
                 sleep: Sleep = time.sleep) -> None:
        self.model, self.base_url, self.temperature = model, base_url, temperature
        self.keys = COMPATIBLE_KEYS if compatible else OPENAI_KEYS
        # a local server needs no key; the SDK insists on a non-empty one
        self.key = api_key("OpenAI", self.keys, required=not compatible) or "not-needed"
        self.name = f"openai-compatible:{base_url}#{model}" if compatible else f"openai:{model}"
        self.http_client, self.sleep = http_client, sleep

    @cached_property
    def client(self) -> Any:
        return openai_client(self.key, self.base_url, self.http_client)

    def _request(self, question: str, context: Sequence[Candidate]) -> dict[str, Any]:
        return {"model": self.model, "temperature": self.temperature,
                "messages": prompts.build(question, context).messages()}

    def generate(self, question: str, context: Sequence[Candidate]) -> Draft:
        return self._complete(self._request(question, context))

    def condense(self, question: str, history: Sequence[Turn]) -> str:
        """``question`` made standalone from ``history`` by the model (``prompts.condense``);
        a reply that is not one line is a ``GenerationError``, not retried."""
        request = {"model": self.model, "temperature": self.temperature,
                   "messages": prompts.condense(question, history).messages()}
        return self._complete(request, prompts.condensed).text

    def _complete(self, request: dict[str, Any], check: Callable[[str], str] | None = None,
                  ) -> Draft:
        def call() -> Draft:
            timeout = request_timeout()
            response = self.client.chat.completions.create(
                **request, **({} if timeout is None else {"timeout": timeout}))
            if not response.choices:
                raise Unusable("the response had no choices")
            choice = response.choices[0]
            if choice.finish_reason == "content_filter":
                raise Unusable("the provider's content filter refused to answer", retry=False)
            refusal = getattr(choice.message, "refusal", None)
            if refusal:
                raise Unusable(f"the model refused to answer: {refusal[:200]}", retry=False)
            return usable(choice.message.content or "", self.name, check)

        return retrying(call, partial(classify_openai, key_names=self.keys), GenerationError,
                        self.name, self.sleep)

    def stream(self, question: str, context: Sequence[Candidate]) -> Iterator[str]:
        request = self._request(question, context)

        def pieces() -> Iterator[str]:
            got = False
            for chunk in self.client.chat.completions.create(**request, stream=True):
                if not chunk.choices:
                    continue
                choice = chunk.choices[0]
                if choice.finish_reason == "content_filter":
                    raise Unusable("the provider's content filter refused to answer", retry=False)
                text = choice.delta.content if choice.delta else None
                if text:
                    got = True
                    yield text
            if not got:
                raise Unusable("the stream had no text")

        return retrying_stream(pieces, partial(classify_openai, key_names=self.keys),
                               GenerationError, self.name, self.sleep)


def from_spec(arg: str, embedder: object) -> OpenAIGenerator:
    """``openai:MODEL`` (``OPENAI_API_KEY``)."""
    from citewise.hosted import model_name

    return OpenAIGenerator(model_name("generator", "openai", arg, "gpt-4o-mini"))


def compatible_from_spec(arg: str, embedder: object) -> OpenAIGenerator:
    """``openai-compatible:URL#MODEL``: a server speaking OpenAI's chat API."""
    from citewise.hosted import compatible_spec

    url, model = compatible_spec("generator", arg)
    return OpenAIGenerator(model, base_url=url, compatible=True)
