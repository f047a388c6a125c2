"""Exact binomial intervals, and how many refusals a labelled set can afford under a guarantee.

**Clopper-Pearson.** The bounds are the success probabilities at which the binomial tail of
the observed count equals ``(1 - confidence) / 2`` (two-sided) or ``1 - confidence`` (the
one-sided ``upper_bound``), found by bisection on the binomial distribution function itself
(no normal approximation).

**The guarantee** (``allowed_refusals``). A threshold is chosen so that a covered question's
chance of being refused is at most ``budget`` with probability ``confidence`` over the labelled
set (Learn-then-Test risk control). The thresholds are tested in a fixed sequence from the most
permissive to the strictest; the hypothesis "this threshold refuses more than ``budget`` of
covered questions" is rejected when the binomial p-value ``P(Bin(n, budget) <= k)`` of its
``k`` refused of ``n`` covered is at most ``1 - confidence`` (the same as its one-sided
Clopper-Pearson upper bound lying within the budget), and the sequence stops at the first
threshold not rejected. Since a stricter threshold never refuses fewer questions, the sequence
ends at the strictest threshold refusing at most ``allowed_refusals(n, budget, confidence)``
covered questions; -1 means no threshold can be certified with ``n`` questions, and
``covered_needed`` says how many (none refused) would do.
"""

from __future__ import annotations

import math
from collections.abc import Callable

CONFIDENCE = 0.95


def binom_cdf(k: int, n: int, p: float) -> float:
    """P(X <= k) for X ~ Binomial(n, p), summed in log space."""
    if k < 0:
        return 0.0
    if p <= 0.0:
        return 1.0
    if p >= 1.0:
        return 1.0 if k >= n else 0.0
    lp, lq = math.log(p), math.log1p(-p)
    logs = [math.lgamma(n + 1) - math.lgamma(i + 1) - math.lgamma(n - i + 1) + i * lp + (n - i) * lq
            for i in range(min(k, n) + 1)]
    top = max(logs)
    return min(1.0, math.exp(top) * sum(math.exp(x - top) for x in logs))


def _solve(f: Callable[[float], float], target: float, increasing: bool) -> float:
    """The p in [0, 1] where the monotone function ``f`` crosses ``target`` (bisection)."""
    lo, hi = 0.0, 1.0
    for _ in range(100):
        mid = (lo + hi) / 2
        if (f(mid) < target) == increasing:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


def _check(k: int, n: int, confidence: float) -> None:
    if not 0 <= k <= n:
        raise ValueError(f"need 0 <= k <= n, got k={k}, n={n}")
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence lies in (0, 1), not {confidence}")


def clopper_pearson(k: int, n: int, confidence: float = CONFIDENCE) -> tuple[float, float]:
    """Exact two-sided interval for a proportion of ``k`` successes in ``n`` trials.

    ``low`` solves P(X >= k | low) = alpha/2 and ``high`` solves P(X <= k | high) = alpha/2
    (alpha = 1 - confidence); ``low`` is 0 when k = 0 and ``high`` is 1 when k = n. With n = 0
    nothing is known: (0, 1).
    """
    _check(k, n, confidence)
    if n == 0:
        return 0.0, 1.0
    tail = (1.0 - confidence) / 2
    low = 0.0 if k == 0 else _solve(lambda p: 1.0 - binom_cdf(k - 1, n, p), tail, increasing=True)
    high = 1.0 if k == n else _solve(lambda p: binom_cdf(k, n, p), tail, increasing=False)
    return low, high


def upper_bound(k: int, n: int, confidence: float = CONFIDENCE) -> float:
    """One-sided exact upper bound: the p where P(X <= k | p) = 1 - confidence (1 if k = n)."""
    _check(k, n, confidence)
    if n == 0 or k == n:
        return 1.0
    return _solve(lambda p: binom_cdf(k, n, p), 1.0 - confidence, increasing=False)


def allowed_refusals(n: int, budget: float, confidence: float | None = None) -> int:
    """How many of ``n`` covered questions a threshold may refuse.

    Without ``confidence``, the point estimate: ``floor(budget * n)``. With it, the largest
    ``k`` with ``P(Bin(n, budget) <= k) <= 1 - confidence`` (the guarantee in the module
    docstring), or -1 when even ``k = 0`` is not enough.
    """
    if confidence is None:
        return math.floor(budget * n + 1e-9)
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence lies in (0, 1), not {confidence}")
    k = -1
    while k + 1 <= n and binom_cdf(k + 1, n, budget) <= 1.0 - confidence:
        k += 1
    return k


def covered_needed(budget: float, confidence: float) -> int:
    """The fewest covered questions, none refused, that certify ``budget`` at ``confidence``:
    the smallest ``n`` with ``(1 - budget) ** n <= 1 - confidence``."""
    if not 0.0 < budget < 1.0:
        return 0 if budget >= 1.0 else -1
    n = max(1, math.ceil(math.log(1.0 - confidence) / math.log1p(-budget)) - 1)
    while binom_cdf(0, n, budget) > 1.0 - confidence:
        n += 1
    return n
