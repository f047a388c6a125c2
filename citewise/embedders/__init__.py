"""Embedders chosen by spec string: ``local:all-MiniLM-L6-v2`` (default), ``hashing:256``
(tests), and hosted ones: ``openai:text-embedding-3-large``, ``gemini:text-embedding-004``,
``openai-compatible:URL#MODEL`` (keys from ``OPENAI_API_KEY``, ``GEMINI_API_KEY`` or
``GOOGLE_API_KEY``, optional ``OPENAI_COMPATIBLE_API_KEY``).

The registry maps a prefix to a factory taking the part after the colon. Loaded models are
kept per process, so a CLI run or a server worker loads each model once.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache

from citewise.embedders.base import Embedder, normalise
from citewise.errors import ConfigError, UnknownNameError
from citewise.hosted import compatible_spec, model_name

DEFAULT_EMBEDDER = "local:all-MiniLM-L6-v2"


def _local(model: str) -> Embedder:
    from citewise.embedders.local import LocalEmbedder

    return LocalEmbedder(model)


def _hashing(arg: str) -> Embedder:
    from citewise.embedders.hashing import HashingEmbedder

    try:
        dim = int(arg or 256)
    except ValueError:
        raise ConfigError(f"hashing embedder takes a dimension, e.g. hashing:256, not {arg!r}") from None
    if not 8 <= dim <= 8192:
        raise ConfigError(f"hashing embedder dimension must be 8..8192, not {dim}")
    return HashingEmbedder(dim)


def _openai(arg: str) -> Embedder:
    from citewise.embedders.remote import OpenAIEmbedder

    return OpenAIEmbedder(model_name("embedder", "openai", arg, "text-embedding-3-large"))


def _compatible(arg: str) -> Embedder:
    from citewise.embedders.remote import OpenAIEmbedder

    url, model = compatible_spec("embedder", arg)
    return OpenAIEmbedder(model, base_url=url, compatible=True)


def _gemini(arg: str) -> Embedder:
    from citewise.embedders.remote import GeminiEmbedder

    return GeminiEmbedder(model_name("embedder", "gemini", arg, "text-embedding-004"))


REGISTRY: dict[str, Callable[[str], Embedder]] = {
    "local": _local,
    "hashing": _hashing,
    "openai": _openai,
    "openai-compatible": _compatible,
    "gemini": _gemini,
}


@lru_cache(maxsize=8)
def get_embedder(spec: str = DEFAULT_EMBEDDER) -> Embedder:
    """The embedder a spec names, built once per process."""
    prefix, _, arg = spec.partition(":")
    factory = REGISTRY.get(prefix)
    if factory is None:
        raise UnknownNameError("embedder", prefix, list(REGISTRY))
    return factory(arg)


__all__ = ["DEFAULT_EMBEDDER", "REGISTRY", "Embedder", "get_embedder", "normalise"]
