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
from citewise.kb import KnowledgeBase
from citewise.registry import Registry

DEFAULT_EMBEDDER = "local:all-MiniLM-L6-v2"
REFERENCE_PATH = "onnxruntime-fp32"  # runtimes.REFERENCE, without importing numpy here


# the providers: entry points of citewise.embedders (citewise's own in pyproject.toml)
REGISTRY: Registry[Callable[[str], Embedder]] = Registry("citewise.embedders")


@lru_cache(maxsize=8)
def _built(spec: str) -> Embedder:
    prefix, _, arg = spec.partition(":")
    factory = REGISTRY.get(prefix)
    if factory is None:
        raise UnknownNameError("embedder", prefix, list(REGISTRY))
    return factory(arg)


def get_embedder(spec: str = DEFAULT_EMBEDDER, path: str = "") -> Embedder:
    """The embedder a spec names, built once per process; ``path``: the execution path a
    knowledge base's vectors were made on (the local model's runtime and precision,
    ``runtimes``; "" the host's fastest), ignored by embedders that have one way to run."""
    model = _built(spec)
    on_path = getattr(model, "on_path", None)
    return on_path(path) if path and on_path is not None else model


def embedder_of(kb: KnowledgeBase) -> Embedder:
    """The embedder that embeds ``kb``'s questions as its vectors were made: on its recorded
    execution path, or, where none is recorded (a knowledge base from before paths were, or
    not yet ingested into), on ONNX Runtime in float32, as those were made."""
    return get_embedder(kb.config.embedder, kb.config.embed_path or REFERENCE_PATH)


__all__ = ["DEFAULT_EMBEDDER", "REGISTRY", "Embedder", "embedder_of", "get_embedder", "normalise"]
