"""Stratified k-fold cross-validation, for comparing gate policies on questions none of them
was fitted or thresholded on.

``folds`` deals each bucket's questions, shuffled with a fixed seed, round the ``k`` folds in
turn, so every fold holds about the same share of each bucket and the same labels always give
the same folds. ``out_of_fold`` runs ``fit_apply(train, test)`` once per fold and puts each
question's result where it belongs.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence

import numpy as np

FOLDS = 5
SEED = 19


def folds(buckets: Sequence[str], k: int = FOLDS, seed: int = SEED) -> np.ndarray:
    """The fold (0 .. k-1) of each question, stratified by bucket."""
    rng = random.Random(seed)
    out = np.zeros(len(buckets), dtype=np.int64)
    turn = 0
    for bucket in sorted(set(buckets)):
        mine = [i for i, b in enumerate(buckets) if b == bucket]
        rng.shuffle(mine)
        for i in mine:
            out[i] = turn % k
            turn += 1
    return out


def out_of_fold(fold: np.ndarray, fit_apply: Callable[[np.ndarray, np.ndarray], np.ndarray],
                ) -> np.ndarray:
    """Each question's result from ``fit_apply(train_indices, test_indices)``, which returns one
    result per test index, computed without its own fold."""
    out: np.ndarray | None = None
    for f in sorted(set(fold.tolist())):
        test = np.flatnonzero(fold == f)
        train = np.flatnonzero(fold != f)
        got = np.asarray(fit_apply(train, test))
        if out is None:
            out = np.zeros(len(fold), dtype=got.dtype)
        out[test] = got
    return out if out is not None else np.zeros(0)


def usable_folds(counts: Sequence[int], k: int = FOLDS) -> int:
    """How many folds the labels allow: at most ``k``, at most the smallest class count (the
    covered questions and the questions to refuse); below 2, no cross-validation."""
    return min([k, *counts]) if counts else 0
