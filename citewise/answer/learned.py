"""The ``learned`` gate policy: logistic regression over the gate's signals.

The model is small and inspectable: one coefficient per signal in ``FEATURES`` and an
intercept, over signals standardised with the labelled questions' own means and standard
deviations, all stored with the knowledge base's calibration (``GateSetting.details["model"]``).
Its value for a question is the probability that the question is covered; the gate answers
when that reaches the threshold, chosen like any other policy's.

Fitting (``fit``) minimises the weighted logistic loss plus ``RIDGE / 2`` times the squared
coefficients (not the intercept) by Newton's method, with numpy alone. Calibration weighs the
questions so that covered questions and the refuse buckets count the same in total (each
refuse bucket the same share), as its score does. ``margin`` is not a feature: it is
``top1 - pool``, which a linear model already has.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from citewise.errors import ConfigError
from citewise.records import Signals

FEATURES = ("top1", "mean", "pool", "coverage", "sentence_terms", "sentence_cosine", "agreement",
            "kb_terms", "answerable")
RIDGE = 1.0
MAX_STEPS = 100


def matrix(signals: Sequence[Signals], features: Sequence[str] = FEATURES) -> np.ndarray:
    """One row per question, one column per feature."""
    return np.array([[float(getattr(s, f)) for f in features] for s in signals],
                    dtype=np.float64).reshape(len(signals), len(features))


@dataclass(frozen=True)
class LearnedModel:
    features: tuple[str, ...]
    mean: tuple[float, ...]
    scale: tuple[float, ...]
    coef: tuple[float, ...]
    intercept: float

    def logits(self, x: np.ndarray) -> np.ndarray:
        z = (x - np.asarray(self.mean)) / np.asarray(self.scale)
        return z @ np.asarray(self.coef) + self.intercept

    def value(self, s: Signals) -> float:
        """The probability that the question is covered."""
        return float(_sigmoid(self.logits(matrix([s], self.features)))[0])

    def values(self, signals: Sequence[Signals]) -> np.ndarray:
        return _sigmoid(self.logits(matrix(signals, self.features)))

    def as_dict(self) -> dict[str, Any]:
        return {"features": list(self.features), "mean": [round(m, 6) for m in self.mean],
                "scale": [round(s, 6) for s in self.scale],
                "coef": [round(c, 6) for c in self.coef], "intercept": round(self.intercept, 6)}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> LearnedModel:
        """A stored model; ``ConfigError`` if it is malformed or names an unknown signal."""
        try:
            features = tuple(str(f) for f in d["features"])
            parts = [tuple(float(x) for x in d[k]) for k in ("mean", "scale", "coef")]
            intercept = float(d["intercept"])
        except (KeyError, TypeError, ValueError):
            raise ConfigError("The stored learned gate model is malformed; run `citewise "
                              "calibrate --policy learned` again.") from None
        unknown = [f for f in features if f not in Signals.__dataclass_fields__ and f != "margin"]
        if unknown or any(len(p) != len(features) for p in parts) or not features:
            raise ConfigError(f"The stored learned gate model does not fit the gate's signals "
                              f"({', '.join(unknown) or 'lengths differ'}); calibrate again.")
        values = [x for p in parts for x in p] + [intercept]
        if not all(math.isfinite(x) for x in values) or any(s <= 0 for s in parts[1]):
            raise ConfigError("The stored learned gate model holds non-finite numbers; calibrate again.")
        return cls(features, parts[0], parts[1], parts[2], intercept)


def _sigmoid(z: np.ndarray) -> np.ndarray:
    return 0.5 * (1.0 + np.tanh(0.5 * z))


def fit(signals: Sequence[Signals], covered: Sequence[bool] | np.ndarray,
        weights: Sequence[float] | np.ndarray | None = None, ridge: float = RIDGE,
        features: Sequence[str] = FEATURES) -> LearnedModel:
    """Weighted, ridge-penalised logistic regression of ``covered`` on the signals. A
    knowledge base without a reader has no ``answerable`` signal: it is left out."""
    if "answerable" in features and not any(s.answerable for s in signals):
        features = tuple(f for f in features if f != "answerable")
    x = matrix(signals, features)
    y = np.asarray(covered, dtype=np.float64)
    w = np.ones(len(y)) if weights is None else np.asarray(weights, dtype=np.float64)
    if not len(y):
        raise ValueError("nothing to fit")
    mean = x.mean(axis=0)
    scale = x.std(axis=0)
    scale[scale < 1e-9] = 1.0
    z = np.hstack([np.ones((len(y), 1)), (x - mean) / scale])
    penalty = np.full(z.shape[1], ridge)
    penalty[0] = 0.0
    if y.min() == y.max():  # one class only: the intercept alone cannot be finite; keep it bounded
        penalty[0] = ridge
    beta = np.zeros(z.shape[1])
    for _ in range(MAX_STEPS):
        p = _sigmoid(z @ beta)
        gradient = z.T @ (w * (p - y)) + penalty * beta
        hessian = (z * (w * p * (1 - p))[:, None]).T @ z + np.diag(penalty)
        step = np.linalg.solve(hessian + 1e-9 * np.eye(len(beta)), gradient)
        beta -= step
        if np.max(np.abs(step)) < 1e-10:
            break
    return LearnedModel(tuple(features), tuple(float(m) for m in mean),
                        tuple(float(s) for s in scale), tuple(float(b) for b in beta[1:]),
                        float(beta[0]))
