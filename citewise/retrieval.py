"""Retrieval: dense top-k (the store's search, exact or approximate, always with exact
cosines), BM25 top-k, fusion (RRF or convex), then MMR.

The scoring functions are pure and work on arrays; ``retrieve`` runs them over any store.
Every candidate keeps its raw cosine (computed for BM25-only hits too), because the gate
reads cosines, never fused scores: an RRF score tops out near 1/60 and means only rank.
``Candidate.rrf`` holds the fused score of whichever fusion the settings name (published as
``"fused"``, and as ``"rrf"`` for compatibility).

The retrieval modes are registered in ``MODES``; the CLI's help and the API's ``mode`` field
list its names.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from functools import cache

import numpy as np
from threadpoolctl import ThreadpoolController

from .errors import UnknownNameError
from .kb import KnowledgeBase, Retrieval
from .keywords import plan
from .records import Candidate
from .sentences import content_words
from .stores.base import top_k
from .stores.roles import Store


@dataclass(frozen=True)
class Mode:
    """What a retrieval mode runs: the ranked lists it reads (fused when both), and whether MMR
    picks the context (``None``: as the knowledge base's ``mmr`` setting says)."""

    dense: bool
    bm25: bool
    mmr: bool | None


DEFAULT_MODE = "hybrid"
MODES: dict[str, Mode] = {
    "dense": Mode(dense=True, bm25=False, mmr=False),
    "bm25": Mode(dense=False, bm25=True, mmr=False),
    "hybrid": Mode(dense=True, bm25=True, mmr=None),
    "hybrid+mmr": Mode(dense=True, bm25=True, mmr=True),
}


def get_mode(name: str) -> Mode:
    """The registered retrieval mode ``name``; ``UnknownNameError`` lists the others."""
    mode = MODES.get(name)
    if mode is None:
        raise UnknownNameError("retrieval mode", name, list(MODES))
    return mode


def dense_top(matrix: np.ndarray, query: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Row indices of the ``k`` highest cosines (rows and query unit length), best first."""
    if matrix.shape[0] == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32)
    scores = matrix @ query
    order = top_k(scores, k)
    return order, scores[order]


def rrf(rankings: list[list[int]], k: int = 60,
        weights: tuple[float, ...] | None = None) -> dict[int, float]:
    """Reciprocal rank fusion: ``sum(1 / (k + rank))`` over the rankings a key appears in.

    With ``weights`` (one per ranking, summing to 1) each term is scaled by
    ``len(rankings) * weight``, so equal weights give plain RRF.
    """
    scale = [len(rankings) * w for w in weights] if weights else [1.0] * len(rankings)
    fused: dict[int, float] = {}
    for ranking, factor in zip(rankings, scale, strict=True):
        for rank, key in enumerate(ranking, 1):
            fused[key] = fused.get(key, 0.0) + factor / (k + rank)
    return fused


def convex(cosine: dict[int, float], dense_top: list[float], bm25: dict[int, float],
           dense_weight: float) -> dict[int, float]:
    """``w * dense + (1 - w) * bm25`` over every key of ``cosine``, each side min-max scaled
    to 0..1 over its own top-k list (``dense_top``, the cosines of the dense top-k; ``bm25``,
    the BM25 top-k). A BM25-only hit keeps its real cosine (clipped at the dense floor); a
    dense-only hit scores 0 on the BM25 side, below every BM25 hit."""
    def scaler(values: list[float]) -> tuple[float, float]:
        if not values:
            return 0.0, 1.0
        lo, hi = min(values), max(values)
        return lo, (hi - lo) or 1.0

    d_lo, d_span = scaler(dense_top)
    b_lo, b_span = scaler(list(bm25.values()))
    out = {}
    for key, cos in cosine.items():
        dense = min(max((cos - d_lo) / d_span, 0.0), 1.0) if dense_top else 0.0
        lexical = (bm25[key] - b_lo) / b_span if key in bm25 else 0.0
        out[key] = dense_weight * dense + (1.0 - dense_weight) * lexical
    return out


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


@cache
def _blas() -> ThreadpoolController:
    """One controller per process: ``threadpool_limits()`` rescans every loaded library on each
    call (45-60 ms with torch loaded, measured on this machine); a kept controller's ``limit``
    costs ~0.02 ms."""
    return ThreadpoolController()


def keyword_terms(question: str) -> list[str]:
    return content_words(question)


def keyword_search(store: Store, kb: KnowledgeBase, question: str, s: Retrieval
                   ) -> list[tuple[int, float]]:
    """BM25 top ``bm25_k`` for the question's content words, common words of a large
    knowledge base handled as ``citewise/keywords.py`` says."""
    q = plan(store, kb, keyword_terms(question), s)
    return store.keyword(kb, list(q.terms), s.bm25_k, within=q.within)


def retrieve(
    store: Store,
    kb: KnowledgeBase,
    query_vector: np.ndarray,
    question: str,
    settings: Retrieval | None = None,
    mode: str = DEFAULT_MODE,
) -> Retrieved:
    """Run one question through dense, BM25, fusion and (optionally) MMR.

    ``mode`` names one of ``MODES`` (``UnknownNameError`` otherwise): ``dense`` or ``bm25``
    alone, or both fused; the default ``hybrid`` follows the knowledge base's ``mmr`` setting.
    BLAS is held to one thread throughout: small matrix products are slower with two BLAS
    threads fighting the query embedder for two cores.
    """
    how = get_mode(mode)
    with _blas().limit(limits=1, user_api="blas"):
        return _retrieve(store, kb, query_vector, question, settings or kb.config.retrieval, how)


def _retrieve(store: Store, kb: KnowledgeBase, query_vector: np.ndarray, question: str,
              s: Retrieval, mode: Mode) -> Retrieved:
    timings: dict[str, float] = {}
    t = time.perf_counter()
    found, _ = store.dense_search(kb, query_vector, s.dense_k)
    dense_keys = [int(key) for key in found]
    timings["dense_ms"] = (time.perf_counter() - t) * 1000

    t = time.perf_counter()
    bm25_hits = keyword_search(store, kb, question, s) if mode.bm25 else []
    timings["bm25_ms"] = (time.perf_counter() - t) * 1000

    t = time.perf_counter()
    bm25_keys = [key for key, _ in bm25_hits]
    bm25_score = dict(bm25_hits)
    one = None if mode.dense and mode.bm25 else dense_keys if mode.dense else bm25_keys
    keys = list(dict.fromkeys([*dense_keys, *bm25_keys] if one is None else one))
    vectors = store.vectors(kb, keys)
    cosine = dict(zip(keys, (vectors @ query_vector).tolist(), strict=True)) if keys else {}
    if one is not None:  # one list: its reciprocal ranks
        fused = {key: 1.0 / (s.rrf_k + r) for r, key in enumerate(one, 1)}
    elif s.fusion == "convex":
        fused = convex(cosine, [cosine[k] for k in dense_keys], bm25_score, s.dense_weight)
    else:
        fused = rrf([dense_keys, bm25_keys], s.rrf_k, (s.dense_weight, 1.0 - s.dense_weight))
    order = sorted(fused, key=lambda key: -fused[key])
    position = {key: i for i, key in enumerate(keys)}
    vectors = vectors[[position[key] for key in order]] if order else vectors
    dense_rank = {key: r for r, key in enumerate(dense_keys, 1)}
    bm25_rank = {key: r for r, key in enumerate(bm25_keys, 1)}
    chunks = store.chunks(kb, order)
    candidates = tuple(
        Candidate(chunks[key], float(cosine[key]), float(bm25_score.get(key, 0.0)),
                  float(fused[key]), dense_rank.get(key, 0), bm25_rank.get(key, 0))
        for key in order
    )
    if (s.mmr if mode.mmr is None else mode.mmr) and candidates:
        relevance = np.array([c.rrf for c in candidates])
        relevance = relevance / relevance.max() if relevance.max() > 0 else relevance
        picked = mmr(relevance, vectors, s.context_k, s.mmr_lambda)
        context = tuple(candidates[i] for i in picked)
    else:
        context = candidates[: s.context_k]
    timings["fuse_ms"] = (time.perf_counter() - t) * 1000
    return Retrieved(candidates, context, query_vector, timings)
