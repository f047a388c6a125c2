"""Calibrate the refusal gate from labelled questions, and say how sure the numbers are.

    observations = collect(engine, kb, queries)          # each question's gate signals, once
    result = calibrate(observations, "auto", max_covered_refusal=0.05)
    store.update_kb(kb.name, replace(kb.config, gate=setting_for(kb.config, result)))

**The sweep.** For one policy, each question has one value (``gate.get_policy(p).value``) and
the gate refuses it when the value is below the threshold (or nothing was retrieved). Only the
observed values matter: a threshold between two neighbouring values refuses the same questions
as any other between them. The chosen threshold refuses as many questions as possible while
refusing at most ``max_covered_refusal`` of the covered ones (``expect == "answer"``): the
highest observed value ``v`` that keeps that bound, with the threshold placed midway between
``v`` and the next value below it, so neither side sits on the edge.

**auto** calibrates every policy in ``AUTO_POLICIES`` that way and keeps the one whose chosen
threshold refuses the largest mean share of the buckets that should be refused (each bucket
weighs the same, whatever its size); ties go to the larger ROC AUC between covered questions
and the rest, then to the simpler policy (the order of ``AUTO_POLICIES``).

**The intervals** are exact Clopper-Pearson intervals: the bounds are the success
probabilities at which the binomial tail of the observed count equals ``(1 - confidence) / 2``,
found by bisection on the binomial distribution function itself (no normal approximation).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import numpy as np

from . import gate
from .embedders import get_embedder
from .engine import Engine, check_question
from .errors import QueryError
from .kb import GateSetting, KBConfig, KnowledgeBase
from .querysets import BUCKETS, LabelledQuery
from .records import Signals

AUTO_POLICIES = ("top1", "mean", "pool", "coverage", "combined:0.25", "combined:0.5", "combined:1")
CONFIDENCE = 0.95
RELATED_FLOOR_QUANTILE = 0.95


@dataclass(frozen=True)
class Observation:
    """One labelled question's gate signals."""

    id: str
    bucket: str
    expect: str  # "answer" | "refuse"
    signals: Signals


@dataclass(frozen=True)
class Rate:
    """How many of a bucket's ``n`` questions were refused, with an exact interval."""

    bucket: str
    n: int
    refused: int
    low: float
    high: float

    @property
    def rate(self) -> float:
        return self.refused / self.n if self.n else 0.0

    def as_dict(self) -> dict[str, Any]:
        return {"bucket": self.bucket, "n": self.n, "refused": self.refused,
                "rate": round(self.rate, 4), "low": round(self.low, 4), "high": round(self.high, 4)}


@dataclass(frozen=True)
class PolicyResult:
    """One policy calibrated: its threshold and what that threshold does on the labelled set."""

    policy: str
    threshold: float
    rates: tuple[Rate, ...]
    score: float  # mean refusal rate of the buckets that should be refused
    auc: float  # P(covered value > other value), ties counted half


@dataclass(frozen=True)
class Calibration:
    chosen: PolicyResult
    compared: tuple[PolicyResult, ...]
    max_covered_refusal: float
    n: int
    related_floor: float | None


# -- intervals ---------------------------------------------------------------------------------


def _binom_cdf(k: int, n: int, p: float) -> float:
    """P(X <= k) for X ~ Binomial(n, p), summed in log space."""
    if p <= 0.0:
        return 1.0
    if p >= 1.0:
        return 1.0 if k >= n else 0.0
    lp, lq = math.log(p), math.log1p(-p)
    logs = [math.lgamma(n + 1) - math.lgamma(i + 1) - math.lgamma(n - i + 1) + i * lp + (n - i) * lq
            for i in range(k + 1)]
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


def clopper_pearson(k: int, n: int, confidence: float = CONFIDENCE) -> tuple[float, float]:
    """Exact two-sided interval for a proportion of ``k`` successes in ``n`` trials.

    ``low`` solves P(X >= k | low) = alpha/2 and ``high`` solves P(X <= k | high) = alpha/2
    (alpha = 1 - confidence); ``low`` is 0 when k = 0 and ``high`` is 1 when k = n. With n = 0
    nothing is known: (0, 1).
    """
    if not 0 <= k <= n:
        raise ValueError(f"need 0 <= k <= n, got k={k}, n={n}")
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence lies in (0, 1), not {confidence}")
    if n == 0:
        return 0.0, 1.0
    tail = (1.0 - confidence) / 2
    low = 0.0 if k == 0 else _solve(lambda p: 1.0 - _binom_cdf(k - 1, n, p), tail, increasing=True)
    high = 1.0 if k == n else _solve(lambda p: _binom_cdf(k, n, p), tail, increasing=False)
    return low, high


def refusal_rates(outcomes: Iterable[tuple[str, bool]], confidence: float = CONFIDENCE) -> tuple[Rate, ...]:
    """Per-bucket refusal rates with exact intervals, from ``(bucket, refused)`` pairs.

    Buckets come in the order covered, thin, out_of_scope, then any others by name.
    """
    counts: dict[str, list[int]] = {}
    for bucket, refused in outcomes:
        c = counts.setdefault(bucket, [0, 0])
        c[0] += 1
        c[1] += bool(refused)
    order = [b for b in BUCKETS if b in counts] + sorted(b for b in counts if b not in BUCKETS)
    return tuple(Rate(b, counts[b][0], counts[b][1], *clopper_pearson(counts[b][1], counts[b][0], confidence))
                 for b in order)


# -- signals -----------------------------------------------------------------------------------


def bucket_of(q: LabelledQuery) -> str:
    return q.bucket or ("covered" if q.expect == "answer" else "refuse")


def collect(engine: Engine, kb: KnowledgeBase, queries: Sequence[LabelledQuery],
            progress: Callable[[int], None] | None = None, batch: int = 64) -> list[Observation]:
    """Run every labelled question through retrieval (never the generator) and keep its signals.

    Questions are embedded in batches (one model call per ``batch``), then retrieved and read
    one by one by ``Engine.decide``, as ``ask`` does with the knowledge base's own settings.
    """
    unlabelled = [q.id for q in queries if q.expect not in ("answer", "refuse")]
    if unlabelled:
        raise QueryError(
            f"Calibration needs every question labelled \"expect\": \"answer\" or \"refuse\"; "
            f"{len(unlabelled)} are not (first: {unlabelled[0]}). A BEIR query set has no refusals."
        )
    model = get_embedder(kb.config.embedder)
    the_gate = gate.gate_for(kb.config)[0]
    out = []
    for start in range(0, len(queries), batch):
        part = queries[start : start + batch]
        texts = [check_question(q.query) for q in part]
        for q, text, vector in zip(part, texts, model.embed(texts), strict=True):
            s = engine.decide(kb, text, vector, the_gate=the_gate).signals
            out.append(Observation(q.id, bucket_of(q), str(q.expect), s))
            if progress:
                progress(1)
    if not any(o.expect == "answer" for o in out):
        raise QueryError("Calibration needs covered questions (expect \"answer\") to bound their refusals")
    return out


def values(observations: Sequence[Observation], policy: str) -> np.ndarray:
    """Each question's value under ``policy``; -inf where nothing was retrieved (always refused)."""
    rule = gate.get_policy(policy)
    return np.array([rule.value(o.signals) if o.signals.n_context else -np.inf for o in observations])


def rates_at(observations: Sequence[Observation], policy: str, threshold: float,
             confidence: float = CONFIDENCE) -> tuple[Rate, ...]:
    """What the gate ``policy >= threshold`` does to each bucket, decided by the gate itself."""
    the_gate = gate.ThresholdGate(policy, threshold)
    return refusal_rates(((o.bucket, not the_gate.decide(o.signals).answer) for o in observations),
                         confidence)


# -- the sweep ---------------------------------------------------------------------------------


def choose_threshold(v: np.ndarray, covered: np.ndarray, max_covered_refusal: float) -> float:
    """The threshold refusing the most questions with at most the allowed covered refusals."""
    allowed = math.floor(max_covered_refusal * int(covered.sum()) + 1e-9)
    finite = np.unique(v[np.isfinite(v)])
    best = None
    for j, cut in enumerate(finite):  # a threshold at ``cut`` refuses every value below it
        if int((covered & (v < cut)).sum()) > allowed:
            break
        best = j
    if best is None:  # nothing but unretrievable covered questions: answer everything retrieved
        return float(finite[0]) if len(finite) else 0.0
    if best == 0:
        return float(finite[0])
    return float((finite[best - 1] + finite[best]) / 2)


def auc(v: np.ndarray, covered: np.ndarray) -> float:
    pos, neg = v[covered], v[~covered]
    if not len(pos) or not len(neg):
        return float("nan")
    greater = (pos[:, None] > neg[None, :]).mean()
    ties = (pos[:, None] == neg[None, :]).mean()
    return float(greater + 0.5 * ties)


def calibrate_policy(observations: Sequence[Observation], policy: str, max_covered_refusal: float,
                     confidence: float = CONFIDENCE) -> PolicyResult:
    spec = gate.get_policy(policy).spec
    v = values(observations, spec)
    covered = np.array([o.expect == "answer" for o in observations])
    threshold = choose_threshold(v, covered, max_covered_refusal)
    rates = rates_at(observations, spec, threshold, confidence)
    refuse_buckets = {o.bucket for o in observations if o.expect == "refuse"}
    wanted = [r.rate for r in rates if r.bucket in refuse_buckets]
    return PolicyResult(spec, threshold, rates, float(np.mean(wanted)) if wanted else 0.0,
                        auc(v, covered))


def related_floor(observations: Sequence[Observation]) -> float | None:
    """The top-1 cosine out-of-scope questions reach (95th percentile): below it, unrelated."""
    top = sorted(o.signals.top1 for o in observations if o.bucket == "out_of_scope")
    if not top:
        return None
    return float(top[max(0, math.ceil(RELATED_FLOOR_QUANTILE * len(top)) - 1)])


def calibrate(observations: Sequence[Observation], policy: str = "auto",
              max_covered_refusal: float = 0.05, confidence: float = CONFIDENCE) -> Calibration:
    """Calibrate one policy, or with ``auto`` every policy in ``AUTO_POLICIES``, and choose."""
    if not 0.0 <= max_covered_refusal < 1.0:
        raise QueryError(f"--max-covered-refusal lies in [0, 1), not {max_covered_refusal}")
    policies = AUTO_POLICIES if policy == "auto" else (policy,)
    compared = [calibrate_policy(observations, p, max_covered_refusal, confidence) for p in policies]
    order = sorted(range(len(compared)), key=lambda i: (-compared[i].score,
                                                        -np.nan_to_num(compared[i].auc), i))
    return Calibration(compared[order[0]], tuple(compared), max_covered_refusal, len(observations),
                       related_floor(observations))


def setting_for(config: KBConfig, result: Calibration, source: str = "") -> GateSetting:
    """The gate setting to store on a knowledge base: tied to its embedder and retrieval."""
    details: dict[str, Any] = {
        "calibrated_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "queries": result.n,
        "file": source,
        "max_covered_refusal": result.max_covered_refusal,
        "buckets": [r.as_dict() for r in result.chosen.rates],
        "compared": {p.policy: round(p.threshold, 4) for p in result.compared},
    }
    if result.related_floor is not None:
        details["related_floor"] = round(result.related_floor, 4)
    return GateSetting(result.chosen.policy, result.chosen.threshold, config.embedder,
                       config.fingerprint(), "calibrated", details)


def rate_table(rows: Sequence[tuple[str, str, float, Sequence[Rate]]]) -> str:
    """A plain-text table of ``(label, policy, threshold, rates)`` rows, one line per bucket."""
    lines = [f"{'gate':<20} {'policy':<14} {'threshold':>9}  {'bucket':<13} {'n':>5} {'refused':>7} "
             f"{'rate':>7}  95% interval (exact)"]
    for label, policy, threshold, rates in rows:
        head = f"{label:<20} {policy:<14} {threshold:>9.4f}"
        for r in rates:
            lines.append(f"{head}  {r.bucket:<13} {r.n:>5} {r.refused:>7} {r.rate * 100:>6.1f}%  "
                         f"[{r.low * 100:5.1f}%, {r.high * 100:5.1f}%]")
            head = " " * len(head)
    return "\n".join(lines)
