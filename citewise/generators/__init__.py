"""Generators chosen by spec: ``extractive`` (default, offline); ``scripted:...`` (tests only)."""

from __future__ import annotations

from collections.abc import Callable

from ..embedders import Embedder
from ..errors import UnknownNameError
from .base import FALLBACK, Generator

DEFAULT_GENERATOR = "extractive"


def _extractive(arg: str, embedder: Embedder) -> Generator:
    from .extractive import ExtractiveGenerator

    return ExtractiveGenerator(embedder)


def _scripted(arg: str, embedder: Embedder) -> Generator:
    from .scripted import ScriptedGenerator

    return ScriptedGenerator(arg)


REGISTRY: dict[str, Callable[[str, Embedder], Generator]] = {
    "extractive": _extractive,
    "scripted": _scripted,
}


def get_generator(spec: str, embedder: Embedder) -> Generator:
    """The generator a spec names (``name`` or ``name:argument``)."""
    prefix, _, arg = spec.partition(":")
    factory = REGISTRY.get(prefix)
    if factory is None:
        raise UnknownNameError("generator", prefix, list(REGISTRY))
    return factory(arg, embedder)


__all__ = ["DEFAULT_GENERATOR", "FALLBACK", "REGISTRY", "Generator", "get_generator"]
