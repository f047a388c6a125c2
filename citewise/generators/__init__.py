"""Generators chosen by spec: ``extractive`` (default, offline), ``openai:MODEL``,
``gemini:MODEL`` and ``openai-compatible:URL#MODEL``; ``scripted:...`` (tests only).
Keys come from environment variables (``OPENAI_API_KEY``; ``GEMINI_API_KEY`` or ``GOOGLE_API_KEY``; optional
``OPENAI_COMPATIBLE_API_KEY``), read when the generator is built, never stored.
"""

from __future__ import annotations

from collections.abc import Callable

from citewise.embedders import Embedder
from citewise.errors import UnknownNameError
from citewise.generators.base import FALLBACK, CondensingGenerator, Generator, StreamingGenerator
from citewise.hosted import compatible_spec, model_name

DEFAULT_GENERATOR = "extractive"


def _extractive(arg: str, embedder: Embedder) -> Generator:
    from citewise.generators.extractive import ExtractiveGenerator

    return ExtractiveGenerator(embedder)


def _scripted(arg: str, embedder: Embedder) -> Generator:
    from citewise.generators.scripted import ScriptedGenerator

    return ScriptedGenerator(arg)


def _openai(arg: str, embedder: Embedder) -> Generator:
    from citewise.generators.openai_api import OpenAIGenerator

    return OpenAIGenerator(model_name("generator", "openai", arg, "gpt-4o-mini"))


def _compatible(arg: str, embedder: Embedder) -> Generator:
    from citewise.generators.openai_api import OpenAIGenerator

    url, model = compatible_spec("generator", arg)
    return OpenAIGenerator(model, base_url=url, compatible=True)


def _gemini(arg: str, embedder: Embedder) -> Generator:
    from citewise.generators.gemini_api import GeminiGenerator

    return GeminiGenerator(model_name("generator", "gemini", arg, "gemini-2.5-flash"))


REGISTRY: dict[str, Callable[[str, Embedder], Generator]] = {
    "extractive": _extractive,
    "scripted": _scripted,
    "openai": _openai,
    "openai-compatible": _compatible,
    "gemini": _gemini,
}


def get_generator(spec: str, embedder: Embedder) -> Generator:
    """The generator a spec names (``name`` or ``name:argument``)."""
    prefix, _, arg = spec.partition(":")
    factory = REGISTRY.get(prefix)
    if factory is None:
        raise UnknownNameError("generator", prefix, list(REGISTRY))
    return factory(arg, embedder)


def is_extractive(spec: str) -> bool:
    """Whether ``spec`` names the extractive generator (which quotes the stored sentences)."""
    return spec.partition(":")[0] == "extractive"


__all__ = ["DEFAULT_GENERATOR", "FALLBACK", "REGISTRY", "CondensingGenerator", "Generator",
           "StreamingGenerator", "get_generator", "is_extractive"]
