"""Retrieval: dense top-k (the store's search, exact or approximate, always with exact
cosines), BM25 top-k, reciprocal rank fusion, then MMR.

The scoring functions are pure and work on arrays; ``retrieve`` runs them over any store.
Every candidate keeps its raw cosine (computed for BM25-only hits too), because the gate
reads cosines, never fused scores: an RRF score tops out near 1/60 and means only rank.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np
from threadpoolctl import threadpool_limits

from .kb import KnowledgeBase, Retrieval
from .records import Candidate
from .sentences import content_words
from .stores.base import Store, top_k


def dense_top(matrix: np.ndarray, query: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Row indices of the ``k`` highest cosines (rows and query unit length), best first."""
    if matrix.shape[0] == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32)
    scores = matrix @ query
    order = top_k(scores, k)
    return order, scores[order]


def rrf(rankings: list[list[int]], k: int = 60) -> dict[int, float]:
    """Reciprocal rank fusion: ``sum(1 / (k + rank))`` over the rankings a key appears in."""
    fused: dict[int, float] = {}
    for ranking in rankings:
        for rank, key in enumerate(ranking, 1):
            fused[key] = fused.get(key, 0.0) + 1.0 / (k + rank)
    return fused


def mmr(
    relevance: np.ndarray, vectors: np.ndarray, k: int, lambda_: float = 0.7
) -> list[int]:
    """Maximal marginal relevance: indices chosen greedily by
    ``lambda * relevance - (1 - lambda) * max cosine to what is already chosen``.
    ``relevance`` should be on a 0..1 scale; ``vectors`` are unit rows.
    """
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


@dataclass(frozen=True)
class Retrieved:
    """Fused candidates (best first), the context chosen from them, and per-stage timings."""

    candidates: tuple[Candidate, ...]
    context: tuple[Candidate, ...]
    query_vector: np.ndarray = field(compare=False)
    timings: dict[str, float] = field(default_factory=dict, compare=False)


def keyword_terms(question: str) -> list[str]:
    return content_words(question)


def retrieve(
    store: Store,
    kb: KnowledgeBase,
    query_vector: np.ndarray,
    question: str,
    settings: Retrieval | None = None,
    mode: str = "hybrid",
) -> Retrieved:
    """Run one question through dense, BM25, RRF and (optionally) MMR.

    ``mode`` is ``dense``, ``bm25``, ``hybrid`` (RRF, no MMR) or ``hybrid+mmr``; the default
    ``hybrid`` follows the knowledge base's ``mmr`` setting.
    """
    s = settings or kb.config.retrieval
    timings: dict[str, float] = {}
    t = time.perf_counter()
    # small matrix products are slower with two BLAS threads fighting the embedder for 2 cores
    with threadpool_limits(1):
        found, _ = store.dense_search(kb, query_vector, s.dense_k)
    dense_keys = [int(key) for key in found]
    timings["dense_ms"] = (time.perf_counter() - t) * 1000

    t = time.perf_counter()
    bm25_hits = store.keyword(kb, keyword_terms(question), s.bm25_k) if mode != "dense" else []
    timings["bm25_ms"] = (time.perf_counter() - t) * 1000

    t = time.perf_counter()
    bm25_keys = [key for key, _ in bm25_hits]
    if mode == "dense":
        fused = {key: 1.0 / (s.rrf_k + r) for r, key in enumerate(dense_keys, 1)}
    elif mode == "bm25":
        fused = {key: 1.0 / (s.rrf_k + r) for r, key in enumerate(bm25_keys, 1)}
    else:
        fused = rrf([dense_keys, bm25_keys], s.rrf_k)
    order = sorted(fused, key=lambda key: -fused[key])
    dense_rank = {key: r for r, key in enumerate(dense_keys, 1)}
    bm25_rank = {key: r for r, key in enumerate(bm25_keys, 1)}
    bm25_score = dict(bm25_hits)
    chunks = store.chunks(kb, order)
    with threadpool_limits(1):
        vectors = store.vectors(kb, order)
        all_cos = vectors @ query_vector if order else np.zeros(0, np.float32)
        candidates = tuple(
            Candidate(chunks[key], float(all_cos[i]), float(bm25_score.get(key, 0.0)),
                      float(fused[key]), dense_rank.get(key, 0), bm25_rank.get(key, 0))
            for i, key in enumerate(order)
        )
        use_mmr = mode == "hybrid+mmr" or (mode == "hybrid" and s.mmr)
        if use_mmr and candidates:
            relevance = np.array([c.rrf for c in candidates])
            relevance = relevance / relevance.max()
            picked = mmr(relevance, vectors, s.context_k, s.mmr_lambda)
            context = tuple(candidates[i] for i in picked)
        else:
            context = candidates[: s.context_k]
    timings["fuse_ms"] = (time.perf_counter() - t) * 1000
    return Retrieved(candidates, context, query_vector, timings)
