"""A deterministic hashing embedder, for tests only: no model, no network, stable vectors.

Words and word pairs are hashed (blake2b, not Python's salted ``hash``) into ``dim`` buckets
with a sign, so texts that share words have a positive cosine. It knows nothing of meaning.
"""

from __future__ import annotations

import hashlib

import numpy as np

from citewise.embedders.base import normalise
from citewise.sentences import content_words


class HashingEmbedder:
    max_tokens = 100_000

    def __init__(self, dim: int = 256) -> None:
        self.dim = dim
        self.name = f"hashing:{dim}"

    def count_tokens(self, text: str) -> int:
        return len(text.split())

    def _vector(self, text: str) -> np.ndarray:
        v = np.zeros(self.dim, dtype=np.float32)
        tokens = content_words(text) or ["\x00empty"]
        features = tokens + [a + " " + b for a, b in zip(tokens, tokens[1:], strict=False)]
        for f in features:
            digest = hashlib.blake2b(f.encode(), digest_size=8).digest()
            bucket = int.from_bytes(digest[:4], "little") % self.dim
            v[bucket] += 1.0 if digest[4] & 1 else -1.0
        if not v.any():
            v[0] = 1.0
        return v

    def embed(self, texts: list[str], *, progress: bool = False) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return normalise(np.stack([self._vector(t) for t in texts]), self.name)


def from_spec(arg: str) -> HashingEmbedder:
    """``hashing:DIM``: word hashing, for tests."""
    from citewise.errors import ConfigError

    try:
        dim = int(arg or 256)
    except ValueError:
        raise ConfigError(f"hashing embedder takes a dimension, e.g. hashing:256, not {arg!r}") from None
    if not 8 <= dim <= 8192:
        raise ConfigError(f"hashing embedder dimension must be 8..8192, not {dim}")
    return HashingEmbedder(dim)
