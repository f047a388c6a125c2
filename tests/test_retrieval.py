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
