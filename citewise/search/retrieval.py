"""Retrieval: dense top-k (the store's search, exact or approximate, always with exact
cosines), BM25 top-k, fusion (RRF or convex), then MMR.

The scoring functions are pure and work on arrays over the candidates' positions
(``fusion.py``); ``retrieve`` runs them over any store.
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

from citewise.errors import ConfigError, UnknownNameError
from citewise.kb import KnowledgeBase, Retrieval
from citewise.records import Candidate
from citewise.search import fusion
from citewise.search.keywords import plan
from citewise.sentences import spellings
from citewise.stores.base import top_k
from citewise.stores.roles import Answering


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


@dataclass(frozen=True)
class Retrieved:
    """Fused candidates (best first), the context chosen from them, and per-stage timings."""

    candidates: tuple[Candidate, ...]
    context: tuple[Candidate, ...]
    query_vector: np.ndarray = field(compare=False)
    timings: dict[str, float] = field(default_factory=dict, compare=False)
    keys: tuple[int, ...] = field(default=(), compare=False, repr=False)  # the candidates'


@cache
def _blas() -> ThreadpoolController:
    """One controller per process: ``threadpool_limits()`` rescans every loaded library on each
    call (45-60 ms with torch loaded, measured on this machine); a kept controller's ``limit``
    costs ~0.02 ms."""
    return ThreadpoolController()


def keyword_terms(question: str) -> list[str]:
    """The question's words for keyword search. A number typed against its unit is searched
    both ways: "21mg" as the keyword index and full-text search read it in a document that
    writes it so, and "21" and "mg" for one that writes "21 mg"."""
    return list(dict.fromkeys(w for whole, read in spellings(question) for w in (whole, *read)))


def keyword_search(store: Answering, kb: KnowledgeBase, question: str, s: Retrieval
                   ) -> list[tuple[int, float]]:
    """BM25 top ``bm25_k`` for the question's content words, common words of a large
    knowledge base handled as ``citewise/search/keywords.py`` says."""
    q = plan(store, kb, keyword_terms(question), s)
    within = list(q.within) if q.within is not None else None
    return store.keyword(kb, list(q.terms), s.bm25_k, within=within)


def retrieve(
    store: Answering,
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
    threads fighting the query embedder for two cores. The store reads the knowledge base's
    version once for the whole retrieval (``store.pinned``).
    """
    how = get_mode(mode)
    with _blas().limit(limits=1, user_api="blas"), store.pinned(kb):  # one version read
        return _retrieve(store, kb, query_vector, question, settings or kb.config.retrieval, how)


def _retrieve(store: Answering, kb: KnowledgeBase, query_vector: np.ndarray, question: str,
              s: Retrieval, mode: Mode) -> Retrieved:
    timings: dict[str, float] = {}
    t = time.perf_counter()
    found, _ = store.dense_search(kb, query_vector, s.dense_k)
    timings["dense_ms"] = (time.perf_counter() - t) * 1000

    t = time.perf_counter()
    bm25_hits = keyword_search(store, kb, question, s) if mode.bm25 else []
    timings["bm25_ms"] = (time.perf_counter() - t) * 1000

    t = time.perf_counter()
    pool = fusion.pool(found, [key for key, _ in bm25_hits], [score for _, score in bm25_hits])
    if not mode.dense:  # BM25 alone: its hits, each with its dense rank if it has one
        pool = pool.only(pool.bm25_rank)
    keys = pool.keys.tolist()
    vectors = store.vectors(kb, keys)
    cosine = (vectors @ query_vector).astype(np.float64) if keys else np.zeros(0)
    if not (mode.dense and mode.bm25):  # one list: its reciprocal ranks
        fused = fusion.rrf([pool.dense_rank if mode.dense else pool.bm25_rank], s.rrf_k)
    elif s.fusion == "convex":
        fused = fusion.convex(cosine, pool.dense_rank, pool.bm25, pool.bm25_rank, s.dense_weight)
    else:
        fused = fusion.rrf([pool.dense_rank, pool.bm25_rank], s.rrf_k,
                           (s.dense_weight, 1.0 - s.dense_weight))
    order = fusion.ranked(fused)
    ordered = [keys[i] for i in order.tolist()]
    chunks = store.chunks(kb, ordered)
    candidates = tuple(
        Candidate(chunks[key], cos, bm25, score, dense_rank, bm25_rank)
        for key, cos, bm25, score, dense_rank, bm25_rank in zip(
            ordered, cosine[order].tolist(), pool.bm25[order].tolist(), fused[order].tolist(),
            pool.dense_rank[order].tolist(), pool.bm25_rank[order].tolist(), strict=True)
    )
    relevance = fused[order]
    top = relevance.max(initial=0.0)
    relevance = relevance / top if top > 0 else relevance
    vectors = vectors[order]
    timings["fuse_ms"] = (time.perf_counter() - t) * 1000
    if s.rerank and candidates and mode.dense and mode.bm25:
        t = time.perf_counter()
        at, relevance = _rerank(kb, question, candidates, relevance, s.rerank)
        candidates, vectors = tuple(candidates[i] for i in at), vectors[at]
        ordered = [ordered[i] for i in at]
        timings["rerank_ms"] = (time.perf_counter() - t) * 1000
    t = time.perf_counter()
    if (s.mmr if mode.mmr is None else mode.mmr) and candidates:
        picked = fusion.mmr(relevance, vectors, s.context_k, s.mmr_lambda)
        context = tuple(candidates[i] for i in picked)
    else:
        context = candidates[: s.context_k]
    timings["fuse_ms"] += (time.perf_counter() - t) * 1000
    return Retrieved(candidates, context, query_vector, timings, tuple(ordered))


def _rerank(kb: KnowledgeBase, question: str, candidates: tuple[Candidate, ...],
            relevance: np.ndarray, depth: int) -> tuple[np.ndarray, np.ndarray]:
    """The candidates' new order, the top ``depth`` reordered by the reader, and MMR's
    relevance in that order: what the reader read for them, the rest their own scaled below
    the lowest reranked."""
    from citewise.reader import get_reader
    from citewise.reader.reading import relevance as read_relevance

    reader = get_reader(kb.config.reads)
    if reader is None:
        raise ConfigError("rerank needs the reader: set reader=auto on this knowledge base")
    top = candidates[:depth]
    scores = read_relevance(reader, question, [c.chunk for c in top])
    order = np.concatenate([np.argsort(-scores, kind="stable"), np.arange(len(top), len(candidates))])
    rest = relevance[len(top):] * (float(scores.min()) if len(scores) else 1.0)
    return order, np.concatenate([np.sort(scores)[::-1], rest])
