"""``gemini:MODEL`` through the ``google-genai`` SDK, with the same contract and faults.

The rules go in ``system_instruction`` and the passages with the question in the user turn,
at temperature 0.1. A response blocked for safety (``prompt_feedback.block_reason`` or a
candidate finishing with SAFETY, RECITATION, PROHIBITED_CONTENT, ...) is a refusal by the
provider: not retried, reported as a ``GenerationError``. ``condense`` makes a follow-up
question standalone with one more request of the same kind (``prompts.condense``).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator, Sequence
from functools import cached_property
from typing import Any

from citewise.errors import GenerationError
from citewise.generators import prompts
from citewise.generators.base import usable
from citewise.hosted import Sleep, Unusable, api_key, request_timeout, retrying, retrying_stream
from citewise.hosted.clients import GEMINI_KEYS, classify_gemini, gemini_client
from citewise.records import Candidate, Draft, Turn

BLOCKED = {"SAFETY", "RECITATION", "BLOCKLIST", "PROHIBITED_CONTENT", "SPII", "IMAGE_SAFETY",
           "LANGUAGE", "OTHER"}


def _text(response: Any, final: bool = True) -> str:
    """The text of a response (or stream chunk); ``Unusable`` when it was blocked."""
    feedback = getattr(response, "prompt_feedback", None)
    if feedback is not None and feedback.block_reason:
        raise Unusable(f"the provider blocked the prompt ({_name(feedback.block_reason)})", retry=False)
    candidates = response.candidates or []
    if not candidates:
        if final:
            raise Unusable("the response had no candidates")
        return ""
    cand = candidates[0]
    reason = _name(cand.finish_reason) if cand.finish_reason else ""
    if reason in BLOCKED:
        raise Unusable(f"the provider refused to answer (finish reason {reason})", retry=False)
    parts = (cand.content.parts if cand.content else None) or []
    return "".join(p.text for p in parts if getattr(p, "text", None) and not getattr(p, "thought", False))


def _name(value: Any) -> str:
    return str(getattr(value, "name", value))


class GeminiGenerator:
    def __init__(self, model: str, *, temperature: float = prompts.TEMPERATURE,
                 http_client: Any = None, sleep: Sleep = time.sleep) -> None:
        self.model, self.temperature = model, temperature
        self.key = api_key("Gemini", GEMINI_KEYS)
        self.name = f"gemini:{model}"
        self.http_client, self.sleep = http_client, sleep

    @cached_property
    def client(self) -> Any:
        return gemini_client(self.key or "", self.http_client)

    def _request(self, question: str, context: Sequence[Candidate]) -> dict[str, Any]:
        return self._prompt(prompts.build(question, context))

    def _prompt(self, prompt: prompts.Prompt) -> dict[str, Any]:
        from google.genai import types

        config = types.GenerateContentConfig(system_instruction=prompt.system,
                                             temperature=self.temperature)
        return {"model": self.model, "contents": prompt.user, "config": config}

    def generate(self, question: str, context: Sequence[Candidate]) -> Draft:
        return self._complete(self._request(question, context))

    def condense(self, question: str, history: Sequence[Turn]) -> str:
        """``question`` made standalone from ``history`` by the model (``prompts.condense``);
        a reply that is not one line is a ``GenerationError``, not retried."""
        return self._complete(self._prompt(prompts.condense(question, history)),
                              prompts.condensed).text

    def _complete(self, request: dict[str, Any], check: Callable[[str], str] | None = None,
                  ) -> Draft:
        def call() -> Draft:
            from google.genai import types

            timeout = request_timeout()
            config = request["config"] if timeout is None else request["config"].model_copy(
                update={"http_options": types.HttpOptions(timeout=math.ceil(timeout * 1000))})
            return usable(_text(self.client.models.generate_content(**{**request, "config": config})),
                          self.name, check)

        return retrying(call, classify_gemini, GenerationError, self.name, self.sleep)

    def stream(self, question: str, context: Sequence[Candidate]) -> Iterator[str]:
        request = self._request(question, context)

        def pieces() -> Iterator[str]:
            got = False
            for chunk in self.client.models.generate_content_stream(**request):
                text = _text(chunk, final=False)
                if text:
                    got = True
                    yield text
            if not got:
                raise Unusable("the stream had no text")

        return retrying_stream(pieces, classify_gemini, GenerationError, self.name, self.sleep)


def from_spec(arg: str, embedder: object) -> GeminiGenerator:
    """``gemini:MODEL`` (``GEMINI_API_KEY`` or ``GOOGLE_API_KEY``)."""
    from citewise.hosted import model_name

    return GeminiGenerator(model_name("generator", "gemini", arg, "gemini-2.5-flash"))
