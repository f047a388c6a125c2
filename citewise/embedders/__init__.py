"""Embedders chosen by spec string: ``local:all-MiniLM-L6-v2`` (default), ``hashing:256``.

The registry maps a prefix to a factory taking the part after the colon. Loaded models are
kept per process, so a CLI run or a server worker loads each model once.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache

from ..errors import ConfigError, UnknownNameError
from .base import Embedder, normalise

DEFAULT_EMBEDDER = "local:all-MiniLM-L6-v2"


def _local(model: str) -> Embedder:
    from .local import LocalEmbedder

    return LocalEmbedder(model)


def _hashing(arg: str) -> Embedder:
    from .hashing import HashingEmbedder

    try:
        dim = int(arg or 256)
    except ValueError:
        raise ConfigError(f"hashing embedder takes a dimension, e.g. hashing:256, not {arg!r}") from None
    if not 8 <= dim <= 8192:
        raise ConfigError(f"hashing embedder dimension must be 8..8192, not {dim}")
    return HashingEmbedder(dim)


REGISTRY: dict[str, Callable[[str], Embedder]] = {
    "local": _local,
    "hashing": _hashing,
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
