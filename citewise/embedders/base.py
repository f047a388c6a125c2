"""The embedder protocol: one method that matters, ``embed``; the rest are attributes."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Protocol, runtime_checkable

import numpy as np

from citewise.errors import EmbedderError
from citewise.sentences import split_sentences


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into L2-normalised float32 vectors, one row per text.

    ``name`` is the spec that recreates it (``local:all-MiniLM-L6-v2``) and is stored with the
    vectors; ``dim`` their length; ``max_tokens`` how many tokens the model reads of one text
    (``count_tokens`` counts with the model's own tokenizer). A text longer than the model
    reads is never silently cut: implementations embed its pieces and average them.
    """

    name: str
    max_tokens: int

    @property
    def dim(self) -> int: ...  # read-only: a hosted embedder learns it on first use

    def embed(self, texts: list[str], *, progress: bool = False) -> np.ndarray: ...

    def count_tokens(self, text: str) -> int: ...


class TokenEmbedder(Embedder, Protocol):
    """An embedder that also gives its token states (the local model), so that a chunk's
    sentences can be read in their context (``sentence_vectors.contextual``)."""

    def embed_tokens(self, texts: list[str]) -> list[tuple[np.ndarray, np.ndarray]]: ...


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


def split_to_fit(text: str, count_tokens: Callable[[str], int], max_tokens: int) -> list[str]:
    """``text`` itself if it fits ``max_tokens``, else sentence-packed pieces that each fit
    (a single overlong sentence is cut by words). Embedders average the pieces' vectors."""
    if count_tokens(text) <= max_tokens:
        return [text]
    out: list[str] = []
    current: list[str] = []
    used = 0
    for sentence in split_sentences(text):
        n = count_tokens(sentence)
        if n > max_tokens:  # one overlong sentence: cut it by words
            ws = sentence.split()
            step = max(1, len(ws) * max_tokens // (n + 1))
            parts = [" ".join(ws[i : i + step]) for i in range(0, len(ws), step)]
        else:
            parts = [sentence]
        for part in parts:
            n = count_tokens(part)
            if current and used + n > max_tokens:
                out.append(" ".join(current))
                current, used = [], 0
            current.append(part)
            used += n + 1
    if current:
        out.append(" ".join(current))
    return out


def split_all(texts: list[str], pieces: Callable[[str], list[str]]) -> tuple[list[str], list[int]]:
    """Every text's pieces, in order, and for each piece the index of its text."""
    out: list[str] = []
    owner: list[int] = []
    for i, text in enumerate(texts):
        for piece in pieces(text):
            out.append(piece)
            owner.append(i)
    return out, owner


def mean_of_pieces(vectors: np.ndarray, owner: list[int], n_texts: int, name: str) -> np.ndarray:
    """One normalised row per text: the mean of the rows of its pieces (``owner[i]`` is the
    text that piece ``i`` came from)."""
    v = np.asarray(vectors, dtype=np.float32)
    if len(owner) == n_texts:
        return normalise(v, name)
    summed = np.zeros((n_texts, v.shape[1]), dtype=np.float32)
    np.add.at(summed, np.asarray(owner), v)
    return normalise(summed, name)


CACHE_SIZE = 50_000  # vectors (about 75 MB at 384 dimensions)
_cache: OrderedDict[tuple[str, str], np.ndarray] = OrderedDict()
_cache_lock = threading.Lock()


def clear_cache() -> None:
    """Forget the vectors ``embed_cached`` remembers (for timing questions as the first ones)."""
    with _cache_lock:
        _cache.clear()


def embed_cached(embedder: Embedder, texts: list[str]) -> np.ndarray:
    """``embedder.embed(texts)``, remembering vectors per (embedder, text) in a process-wide LRU.

    For the sentences of passages, which the extractive generator and the citation check embed
    again for every question that retrieves the same chunks. Question texts need not go here.
    An embedder with ``memoise = False`` is asked directly: its vectors belong to one context
    (``sentence_vectors.StoredFirst``), so they must not be served to another.
    """
    if not getattr(embedder, "memoise", True):
        return embedder.embed(texts)
    keys = [(embedder.name, t) for t in texts]
    found: dict[tuple[str, str], np.ndarray] = {}
    with _cache_lock:
        for key in keys:
            vector = _cache.get(key)
            if vector is not None:
                _cache.move_to_end(key)
                found[key] = vector
    missing = list(dict.fromkeys(k for k in keys if k not in found))
    if missing:
        vectors = embedder.embed([t for _, t in missing])
        with _cache_lock:
            for key, vector in zip(missing, vectors, strict=True):
                found[key] = _cache[key] = vector
            while len(_cache) > CACHE_SIZE:
                _cache.popitem(last=False)
    if not keys:
        return np.zeros((0, embedder.dim), dtype=np.float32)
    return np.stack([found[k] for k in keys])
