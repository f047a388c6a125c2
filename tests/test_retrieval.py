import numpy as np
import pytest

from citewise.retrieval import dense_top, mmr, rrf


def unit(*rows: list[float]) -> np.ndarray:
    m = np.array(rows, dtype=np.float32)
    return m / np.linalg.norm(m, axis=1, keepdims=True)


def test_rrf_hand_computed() -> None:
    fused = rrf([[1, 2, 3], [3, 1]], k=60)
    assert fused[1] == pytest.approx(1 / 61 + 1 / 62)
    assert fused[2] == pytest.approx(1 / 62)
    assert fused[3] == pytest.approx(1 / 63 + 1 / 61)
    assert sorted(fused, key=lambda key: -fused[key]) == [1, 3, 2]


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
    from citewise.retrieval import rrf as fuse

    assert fuse([[1, 2], [2]], 60, (0.5, 0.5)) == fuse([[1, 2], [2]], 60)
    fused = fuse([[1, 2], [2]], 60, (0.75, 0.25))
    assert fused[1] == pytest.approx(1.5 / 61)
    assert fused[2] == pytest.approx(1.5 / 62 + 0.5 / 61)


def test_convex_fusion_hand_computed() -> None:
    from citewise.retrieval import convex

    # dense top-2 cosines 0.9 and 0.5; key 3 came from BM25 only with cosine 0.3 (below the floor)
    cosine = {1: 0.9, 2: 0.5, 3: 0.3}
    bm25 = {3: 10.0, 2: 4.0}
    fused = convex(cosine, [0.9, 0.5], bm25, dense_weight=0.6)
    assert fused[1] == pytest.approx(0.6 * 1.0 + 0.4 * 0.0)
    assert fused[2] == pytest.approx(0.6 * 0.0 + 0.4 * 0.0)
    assert fused[3] == pytest.approx(0.6 * 0.0 + 0.4 * 1.0)
    cosine[3] = 0.7  # a BM25 hit keeps its real cosine on the dense side
    assert convex(cosine, [0.9, 0.5], bm25, 0.5)[3] == pytest.approx(0.5 * 0.5 + 0.5 * 1.0)


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
    from citewise.retrieval import MODES

    kb = engine.open_kb("s", embedder="hashing:64")
    with pytest.raises(UnknownNameError, match="bm25, dense, hybrid, hybrid\\+mmr") as e:
        engine.retrieve(kb, "anything", mode="hybrid-mmr")  # ran as hybrid before, unnoticed
    assert e.value.valid == sorted(MODES)
