"""Generators chosen by spec, ``NAME`` or ``NAME:ARGUMENT``: ``extractive`` (default, offline),
``openai:MODEL``, ``gemini:MODEL`` and ``openai-compatible:URL#MODEL``; ``scripted:...`` (tests
only); and any other package's, found through the ``citewise.generators`` entry points
(``citewise/registry.py``).
Keys come from environment variables (``OPENAI_API_KEY``; ``GEMINI_API_KEY`` or ``GOOGLE_API_KEY``; optional
``OPENAI_COMPATIBLE_API_KEY``), read when the generator is built, never stored.
"""

from __future__ import annotations

from collections.abc import Callable

from citewise.embedders import Embedder
from citewise.errors import UnknownNameError
from citewise.generators.base import FALLBACK, CondensingGenerator, Generator, StreamingGenerator
from citewise.registry import Registry

DEFAULT_GENERATOR = "extractive"


# the providers: entry points of citewise.generators (citewise's own in pyproject.toml)
REGISTRY: Registry[Callable[[str, Embedder], Generator]] = Registry("citewise.generators")


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
