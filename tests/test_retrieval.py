import numpy as np
import pytest

from citewise.kb import Retrieval
from citewise.records import Candidate, Chunk
from citewise.search import fusion, retrieval
from citewise.search.fusion import mmr
from citewise.search.retrieval import MODES, dense_top
from citewise.stores.base import DenseIndex


def unit(*rows: list[float]) -> np.ndarray:
    m = np.array(rows, dtype=np.float32)
    return m / np.linalg.norm(m, axis=1, keepdims=True)


def positions(*lists: list[int]) -> tuple[list[int], list[np.ndarray]]:
    """The keys of ``lists`` in first-seen order and each list's ranks over them."""
    keys = list(dict.fromkeys(k for one in lists for k in one))
    return keys, [np.array([one.index(k) + 1 if k in one else 0 for k in keys]) for one in lists]


def test_rrf_hand_computed() -> None:
    keys, ranks = positions([1, 2, 3], [3, 1])
    fused = dict(zip(keys, fusion.rrf(ranks, k=60).tolist(), strict=True))
    assert fused[1] == pytest.approx(1 / 61 + 1 / 62)
    assert fused[2] == pytest.approx(1 / 62)
    assert fused[3] == pytest.approx(1 / 63 + 1 / 61)
    assert [keys[i] for i in fusion.ranked(fusion.rrf(ranks, k=60))] == [1, 3, 2]


def test_dense_top_orders_by_cosine() -> None:
    m = unit([1, 0], [0, 1], [1, 1])
    rows, scores = dense_top(m, unit([1, 0.1])[0], 2)
    assert rows.tolist() == [0, 2]
    assert scores[0] > scores[1]
    assert dense_top(np.zeros((0, 2), np.float32), unit([1, 0])[0], 5)[0].size == 0


def test_mmr_prefers_diverse_second_pick() -> None:
    vectors = unit([1, 0, 0], [0.99, 0.1, 0], [0, 1, 0])
    relevance = np.array([1.0, 0.95, 0.8])
    assert mmr(relevance, vectors, 2, lambda_=0.5) == [0, 2]
    assert mmr(relevance, vectors, 2, lambda_=1.0) == [0, 1]
    assert mmr(relevance, vectors, 10, lambda_=0.5) == [0, 2, 1]


def test_weighted_rrf_scales_each_ranking() -> None:
    keys, ranks = positions([1, 2], [2])
    np.testing.assert_array_equal(fusion.rrf(ranks, 60, (0.5, 0.5)), fusion.rrf(ranks, 60))
    fused = dict(zip(keys, fusion.rrf(ranks, 60, (0.75, 0.25)).tolist(), strict=True))
    assert fused[1] == pytest.approx(1.5 / 61)
    assert fused[2] == pytest.approx(1.5 / 62 + 0.5 / 61)


def test_convex_fusion_hand_computed() -> None:
    # dense top-2 cosines 0.9 and 0.5; key 3 came from BM25 only with cosine 0.3 (below the floor)
    pool = fusion.pool([1, 2], [3, 2], [10.0, 4.0])
    assert pool.keys.tolist() == [1, 2, 3]
    cosine = np.array([0.9, 0.5, 0.3])
    fused = fusion.convex(cosine, pool.dense_rank, pool.bm25, pool.bm25_rank, dense_weight=0.6)
    assert fused.tolist() == pytest.approx([0.6 * 1.0 + 0.4 * 0.0, 0.6 * 0.0 + 0.4 * 0.0,
                                            0.6 * 0.0 + 0.4 * 1.0])
    cosine[2] = 0.7  # a BM25 hit keeps its real cosine on the dense side
    fused = fusion.convex(cosine, pool.dense_rank, pool.bm25, pool.bm25_rank, 0.5)
    assert fused[2] == pytest.approx(0.5 * 0.5 + 0.5 * 1.0)


def test_the_pool_keeps_first_seen_order_and_each_lists_ranks() -> None:
    pool = fusion.pool([7, 3, 9], [9, 4, 7, 1], [5.0, 4.0, 3.0, 2.0])
    assert pool.keys.tolist() == [7, 3, 9, 4, 1]
    assert pool.dense_rank.tolist() == [1, 2, 3, 0, 0]
    assert pool.bm25_rank.tolist() == [3, 0, 1, 2, 4]
    assert pool.bm25.tolist() == [3.0, 0.0, 5.0, 4.0, 2.0]
    alone = pool.only(pool.bm25_rank)
    assert alone.keys.tolist() == [9, 4, 7, 1]
    assert alone.dense_rank.tolist() == [3, 0, 1, 0]
    empty = fusion.pool(np.zeros(0, np.int64), [], [])
    assert len(empty) == 0 and fusion.rrf([empty.dense_rank], 60).shape == (0,)


# -- the array implementation against the per-key one it replaced, on random inputs --------

def reference_rrf(rankings: list[list[int]], k: int = 60,
                  weights: tuple[float, ...] | None = None) -> dict[int, float]:
    scale = [len(rankings) * w for w in weights] if weights else [1.0] * len(rankings)
    fused: dict[int, float] = {}
    for ranking, factor in zip(rankings, scale, strict=True):
        for rank, key in enumerate(ranking, 1):
            fused[key] = fused.get(key, 0.0) + factor / (k + rank)
    return fused


def reference_convex(cosine: dict[int, float], dense_top: list[float], bm25: dict[int, float],
                     dense_weight: float) -> dict[int, float]:
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


def reference_mmr(relevance: np.ndarray, vectors: np.ndarray, k: int, lambda_: float) -> list[int]:
    n = len(relevance)
    if n == 0:
        return []
    sims = vectors @ vectors.T
    chosen = [int(np.argmax(relevance))]
    while len(chosen) < min(k, n):
        best, best_score = -1, -np.inf
        for i in range(n):
            if i in chosen:
                continue
            score = lambda_ * relevance[i] - (1.0 - lambda_) * max(sims[i, j] for j in chosen)
            if score > best_score:
                best, best_score = i, score
        chosen.append(best)
    return chosen


def reference_retrieve(store: "FakeStore", q: np.ndarray, s: Retrieval, mode: retrieval.Mode
                       ) -> tuple[list[Candidate], list[Candidate]]:
    """``retrieval._retrieve`` as it was written with dictionaries, one key at a time."""
    found, _ = store.dense_search(None, q, s.dense_k)
    dense_keys = [int(key) for key in found]
    bm25_hits = store.hits if mode.bm25 else []
    bm25_keys = [key for key, _ in bm25_hits]
    bm25_score = dict(bm25_hits)
    one = None if mode.dense and mode.bm25 else dense_keys if mode.dense else bm25_keys
    keys = list(dict.fromkeys([*dense_keys, *bm25_keys] if one is None else one))
    vectors = store.vectors(None, keys)
    cosine = dict(zip(keys, (vectors @ q).tolist(), strict=True)) if keys else {}
    if one is not None:
        fused = {key: 1.0 / (s.rrf_k + r) for r, key in enumerate(one, 1)}
    elif s.fusion == "convex":
        fused = reference_convex(cosine, [cosine[k] for k in dense_keys], bm25_score, s.dense_weight)
    else:
        fused = reference_rrf([dense_keys, bm25_keys], s.rrf_k, (s.dense_weight, 1.0 - s.dense_weight))
    order = sorted(fused, key=lambda key: -fused[key])
    position = {key: i for i, key in enumerate(keys)}
    vectors = vectors[[position[key] for key in order]] if order else vectors
    dense_rank = {key: r for r, key in enumerate(dense_keys, 1)}
    bm25_rank = {key: r for r, key in enumerate(bm25_keys, 1)}
    chunks = store.chunks(None, order)
    candidates = [Candidate(chunks[key], float(cosine[key]), float(bm25_score.get(key, 0.0)),
                            float(fused[key]), dense_rank.get(key, 0), bm25_rank.get(key, 0))
                  for key in order]
    if (s.mmr if mode.mmr is None else mode.mmr) and candidates:
        relevance = np.array([c.rrf for c in candidates])
        relevance = relevance / relevance.max() if relevance.max() > 0 else relevance
        return candidates, [candidates[i] for i in reference_mmr(relevance, vectors, s.context_k,
                                                                 s.mmr_lambda)]
    return candidates, candidates[: s.context_k]


class FakeStore:
    """Keys 0..n-1 with the given vectors; ``hits`` is what keyword search finds."""

    def __init__(self, matrix: np.ndarray, hits: list[tuple[int, float]]) -> None:
        self.index = DenseIndex(np.arange(len(matrix), dtype=np.int64), matrix, 1)
        self.hits = hits

    def dense_search(self, kb, query, k):
        return self.index.search(query, k)

    def vectors(self, kb, keys):
        return self.index.take(list(keys), "fake")

    def chunks(self, kb, keys):
        return {int(k): Chunk(f"doc{int(k) // 3}", int(k), (), f"text {int(k)}") for k in keys}


def random_case(rng: np.random.Generator) -> tuple[FakeStore, np.ndarray, Retrieval]:
    n, dim = int(rng.integers(0, 120)), 8
    # few distinct directions and integer BM25 scores: equal cosines and equal fused scores
    base = rng.normal(size=(max(1, int(rng.integers(1, 12))), dim)).astype(np.float32)
    matrix = base[rng.integers(0, len(base), n)] if n else np.zeros((0, dim), np.float32)
    matrix = matrix / np.maximum(np.linalg.norm(matrix, axis=1, keepdims=True), 1e-9)
    hits_n = int(rng.integers(0, min(n, 60) + 1))
    keys = rng.permutation(n)[:hits_n].tolist()
    scores = sorted((float(rng.integers(1, 6)) for _ in keys), reverse=True)
    q = rng.normal(size=dim).astype(np.float32)
    s = Retrieval(dense_k=int(rng.integers(1, 60)), bm25_k=60, rrf_k=int(rng.integers(1, 80)),
                  context_k=int(rng.integers(1, 12)), mmr=bool(rng.integers(0, 2)),
                  mmr_lambda=float(rng.choice([0.0, 0.5, 0.7, 1.0])),
                  fusion=str(rng.choice(["rrf", "convex"])),
                  dense_weight=float(rng.choice([0.0, 0.3, 0.5, 1.0])))
    return FakeStore(matrix, list(zip(keys, scores, strict=True))), q / np.linalg.norm(q), s


@pytest.mark.parametrize("mode", sorted(MODES))
def test_array_retrieval_matches_the_per_key_reference(monkeypatch: pytest.MonkeyPatch,
                                                      mode: str) -> None:
    rng = np.random.default_rng(18)
    tied = 0
    for _ in range(150):
        store, q, s = random_case(rng)
        monkeypatch.setattr(retrieval, "keyword_search", lambda *a, store=store: store.hits)
        got = retrieval._retrieve(store, None, q, "q", s, MODES[mode])  # type: ignore[arg-type]
        want, context = reference_retrieve(store, q, s, MODES[mode])
        assert [c.chunk.ordinal for c in got.candidates] == [c.chunk.ordinal for c in want]
        assert [c.chunk.ordinal for c in got.context] == [c.chunk.ordinal for c in context]
        for a, b in zip(got.candidates, want, strict=True):
            assert (a.dense_rank, a.bm25_rank, a.bm25) == (b.dense_rank, b.bm25_rank, b.bm25)
            assert (a.cosine, a.rrf) == (b.cosine, b.rrf)  # the same arithmetic, bit for bit
        for scores in ([c.rrf for c in want], [c.cosine for c in want]):
            tied += len(scores) - len(set(scores))
    assert tied > 100  # the cases did test the order of equal scores


def test_mmr_matches_a_loop_over_candidates() -> None:
    rng = np.random.default_rng(7)
    for _ in range(200):
        n = int(rng.integers(1, 40))
        vectors = unit(*rng.normal(size=(n, 6)).tolist())
        vectors = vectors[rng.integers(0, n, n)]  # repeated rows: equal similarities
        relevance = rng.integers(0, 4, n) / 3.0  # equal relevances
        k, lambda_ = int(rng.integers(1, 12)), float(rng.choice([0.0, 0.5, 0.7, 1.0]))
        assert mmr(relevance, vectors, k, lambda_) == reference_mmr(relevance, vectors, k, lambda_)


def test_unknown_fusion_lists_the_valid_ones() -> None:
    from citewise.errors import UnknownNameError
    from citewise.kb import Retrieval

    with pytest.raises(UnknownNameError, match="convex, rrf"):
        Retrieval(fusion="linear").validate()


def test_embed_cached_embeds_each_text_once_per_embedder(monkeypatch: pytest.MonkeyPatch) -> None:
    from citewise.embedders import base
    from citewise.embedders.hashing import HashingEmbedder

    monkeypatch.setattr(base, "_cache", base.OrderedDict())
    monkeypatch.setattr(base, "CACHE_SIZE", 3)
    model = HashingEmbedder(32)
    seen: list[list[str]] = []
    real = model.embed
    model.embed = lambda texts, **kw: (seen.append(list(texts)), real(texts))[1]  # type: ignore[method-assign]
    first = base.embed_cached(model, ["a b", "c d", "a b"])
    np.testing.assert_array_equal(first, real(["a b", "c d", "a b"]))
    base.embed_cached(model, ["c d", "e f"])
    assert seen == [["a b", "c d"], ["e f"]]  # only misses reach the model, each once
    base.embed_cached(model, ["g h", "a b"])  # holds 3: "c d", least recently used, goes
    assert seen[-1] == ["g h"]
    base.embed_cached(model, ["c d", "a b"])
    assert seen[-1] == ["c d"]
    assert base.embed_cached(model, []).shape == (0, 32)


def test_an_unknown_retrieval_mode_lists_the_registered_ones(engine) -> None:
    from citewise.errors import UnknownNameError
    from citewise.search.retrieval import MODES

    kb = engine.open_kb("s", embedder="hashing:64")
    with pytest.raises(UnknownNameError, match="bm25, dense, hybrid, hybrid\\+mmr") as e:
        engine.retrieve(kb, "anything", mode="hybrid-mmr")  # ran as hybrid before, unnoticed
    assert e.value.valid == sorted(MODES)


def test_a_number_typed_against_its_unit_is_searched_both_ways(engine, tmp_path) -> None:
    assert retrieval.keyword_terms("Stay on the 21mg patch? 21mg!") == ["stay", "21mg", "21", "mg", "patch"]
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "spaced.md").write_text("# Patch\n\nThe 21 mg patch is worn for six weeks.\n")
    (tmp_path / "docs" / "joined.md").write_text("# Gum\n\nA 4mg gum suits heavier smokers.\n")
    (tmp_path / "docs" / "other.md").write_text("# Lozenge\n\nLozenges dissolve in the mouth.\n")
    kb = engine.open_kb("doses", embedder="hashing:256")
    engine.ingest(kb, [tmp_path / "docs"])
    # (a document's "4mg" is one indexed word: only a question that writes it so finds it)
    for question, doc in (("Is the 21mg one right?", "spaced.md"), ("Who takes 4mg?", "joined.md")):
        found = engine.retrieve(kb, question, mode="bm25")
        assert found.candidates and found.candidates[0].chunk.doc_id == doc, question
