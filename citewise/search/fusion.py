"""Fusion and MMR on arrays over candidate positions.

A question's candidates are the dense top-k followed by the BM25 hits the dense side did not
find (``Pool``); every score lives in an array indexed by that position, so fusing, ordering
and picking the context are a few numpy operations over ~100 rows instead of dictionary
look-ups per key. The arithmetic is the plain one, term for term in float64 (a rank
contribution ``factor / (k + rank)``, a min-max scaled score), so the fused scores are the
same numbers a straightforward per-key loop computes (``tests/test_retrieval.py`` checks
both on random inputs, ties included), and ties keep the first-seen order.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Pool:
    """The candidates of one question, by position: the dense keys in their order, then the
    BM25 keys not among them in theirs. Ranks are 1-based, 0 where a list lacks the key;
    ``bm25`` is the BM25 score, 0 where absent."""

    keys: np.ndarray  # int64
    dense_rank: np.ndarray  # int64
    bm25_rank: np.ndarray  # int64
    bm25: np.ndarray  # float64

    def __len__(self) -> int:
        return len(self.keys)

    def only(self, rank: np.ndarray) -> Pool:
        """The positions that one list ranks (``rank`` > 0), in that list's order."""
        at = np.flatnonzero(rank > 0)
        at = at[np.argsort(rank[at], kind="stable")]
        return Pool(self.keys[at], self.dense_rank[at], self.bm25_rank[at], self.bm25[at])


def pool(dense_keys: Sequence[int] | np.ndarray, bm25_keys: Sequence[int] | np.ndarray,
         bm25_scores: Sequence[float] | np.ndarray) -> Pool:
    """The union of both lists in first-seen order (each list holds a key once, as the stores
    return them), with each key's ranks and BM25 score."""
    dense = np.asarray(dense_keys, dtype=np.int64).reshape(-1)
    lexical = np.asarray(bm25_keys, dtype=np.int64).reshape(-1)
    nd = len(dense)
    both = np.concatenate([dense, lexical])
    uniq, first, inverse = np.unique(both, return_index=True, return_inverse=True)
    seen = np.argsort(first, kind="stable")  # unique keys in first-seen order
    at = np.empty(len(uniq), dtype=np.int64)
    at[seen] = np.arange(len(uniq))
    where = at[inverse.reshape(-1)]  # each list entry's position in the pool
    n = len(uniq)
    dense_rank = np.zeros(n, dtype=np.int64)
    dense_rank[where[:nd]] = np.arange(1, nd + 1)
    bm25_rank = np.zeros(n, dtype=np.int64)
    bm25_rank[where[nd:]] = np.arange(1, len(lexical) + 1)
    bm25 = np.zeros(n, dtype=np.float64)
    bm25[where[nd:]] = np.asarray(bm25_scores, dtype=np.float64).reshape(-1)
    return Pool(uniq[seen], dense_rank, bm25_rank, bm25)


def rrf(ranks: Sequence[np.ndarray], k: int = 60,
        weights: Sequence[float] | None = None) -> np.ndarray:
    """Reciprocal rank fusion over positions: ``sum(factor / (k + rank))`` over the rankings a
    position appears in (rank > 0). With ``weights`` (one per ranking, summing to 1) each
    ranking's factor is ``len(ranks) * weight``, so equal weights give plain RRF."""
    scale = [len(ranks) * w for w in weights] if weights else [1.0] * len(ranks)
    fused = np.zeros(len(ranks[0]) if ranks else 0, dtype=np.float64)
    for rank, factor in zip(ranks, scale, strict=True):
        present = rank > 0
        fused[present] += factor / (k + rank[present])
    return fused


def convex(cosine: np.ndarray, dense_rank: np.ndarray, bm25: np.ndarray, bm25_rank: np.ndarray,
           dense_weight: float) -> np.ndarray:
    """``w * dense + (1 - w) * bm25`` at every position, each side min-max scaled to 0..1 over
    its own top-k list (the cosines of the dense hits, the scores of the BM25 hits). A BM25-only
    hit keeps its real cosine (clipped at the dense floor); a dense-only hit scores 0 on the
    BM25 side, below every BM25 hit."""
    cosine = np.asarray(cosine, dtype=np.float64)
    in_dense, in_bm25 = dense_rank > 0, bm25_rank > 0

    def scaler(values: np.ndarray) -> tuple[float, float]:
        if not len(values):
            return 0.0, 1.0
        lo, hi = float(values.min()), float(values.max())
        return lo, (hi - lo) or 1.0

    dense = np.zeros(len(cosine))
    if in_dense.any():
        d_lo, d_span = scaler(cosine[in_dense])
        dense = np.clip((cosine - d_lo) / d_span, 0.0, 1.0)
    lexical = np.zeros(len(cosine))
    if in_bm25.any():
        b_lo, b_span = scaler(bm25[in_bm25])
        lexical[in_bm25] = (bm25[in_bm25] - b_lo) / b_span
    return dense_weight * dense + (1.0 - dense_weight) * lexical


def ranked(fused: np.ndarray) -> np.ndarray:
    """Positions by fused score, best first; equal scores keep their positions' order."""
    return np.argsort(-fused, kind="stable")


def mmr(relevance: np.ndarray, vectors: np.ndarray, k: int, lambda_: float = 0.7) -> list[int]:
    """Maximal marginal relevance: indices chosen greedily by
    ``lambda * relevance - (1 - lambda) * max cosine to what is already chosen``.
    ``relevance`` should be on a 0..1 scale; ``vectors`` are unit rows. The first highest
    score wins a tie."""
    n = len(relevance)
    if n == 0:
        return []
    sims = vectors @ vectors.T
    chosen = [int(np.argmax(relevance))]
    max_sim = sims[chosen[0]].copy()
    available = np.ones(n, dtype=bool)
    available[chosen[0]] = False
    while len(chosen) < min(k, n):
        score = lambda_ * relevance - (1.0 - lambda_) * max_sim
        score[~available] = -np.inf
        best = int(np.argmax(score))
        chosen.append(best)
        available[best] = False
        np.maximum(max_sim, sims[best], out=max_sim)
    return chosen
