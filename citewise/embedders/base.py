"""The embedder protocol: one method that matters, ``embed``; the rest are attributes."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

import numpy as np

from ..errors import EmbedderError


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into L2-normalised float32 vectors, one row per text.

    ``name`` is the spec that recreates it (``local:all-MiniLM-L6-v2``) and is stored with the
    vectors; ``dim`` their length; ``max_tokens`` how many tokens the model reads of one text
    (``count_tokens`` counts with the model's own tokenizer). A text longer than the model
    reads is never silently cut: implementations embed its pieces and average them.
    """

    name: str
    dim: int
    max_tokens: int

    def embed(self, texts: list[str], *, progress: bool = False) -> np.ndarray: ...

    def count_tokens(self, text: str) -> int: ...


def normalise(vectors: np.ndarray, name: str) -> np.ndarray:
    """Rows scaled to unit length as float32; an all-zero or non-finite row is an error."""
    v = np.asarray(vectors, dtype=np.float32)
    if v.ndim != 2:
        raise EmbedderError(f"{name} returned an array of shape {v.shape}, expected 2-D")
    if not np.isfinite(v).all():
        raise EmbedderError(f"{name} returned NaN or infinite values; the model may be corrupt")
    norms = np.linalg.norm(v, axis=1, keepdims=True)
    if (norms == 0).any():
        raise EmbedderError(f"{name} returned an all-zero vector; cannot compute a cosine")
    return v / norms
