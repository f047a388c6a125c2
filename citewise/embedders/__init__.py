"""Embedders chosen by spec string: ``local:all-MiniLM-L6-v2`` (default), ``hashing:256``
(tests), and hosted ones: ``openai:text-embedding-3-large``, ``gemini:text-embedding-004``,
``openai-compatible:URL#MODEL`` (keys from ``OPENAI_API_KEY``, ``GEMINI_API_KEY`` or
``GOOGLE_API_KEY``, optional ``OPENAI_COMPATIBLE_API_KEY``).

The registry maps a prefix to a factory taking the part after the colon; other packages add
theirs through the ``citewise.embedders`` entry points (``citewise/registry.py``). Loaded models are
kept per process, so a CLI run or a server worker loads each model once.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache

from citewise.embedders.base import Embedder, normalise
from citewise.errors import UnknownNameError
from citewise.registry import Registry

DEFAULT_EMBEDDER = "local:all-MiniLM-L6-v2"


# the providers: entry points of citewise.embedders (citewise's own in pyproject.toml)
REGISTRY: Registry[Callable[[str], Embedder]] = Registry("citewise.embedders")


@lru_cache(maxsize=8)
def get_embedder(spec: str = DEFAULT_EMBEDDER) -> Embedder:
    """The embedder a spec names, built once per process."""
    prefix, _, arg = spec.partition(":")
    factory = REGISTRY.get(prefix)
    if factory is None:
        raise UnknownNameError("embedder", prefix, list(REGISTRY))
    return factory(arg)


__all__ = ["DEFAULT_EMBEDDER", "REGISTRY", "Embedder", "get_embedder", "normalise"]
