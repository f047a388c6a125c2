"""Refusal rates per bucket of labelled questions, each with its exact interval: what
calibration, evaluation and the end-to-end runs report."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from citewise.calibrate.intervals import CONFIDENCE, clopper_pearson
from citewise.calibrate.querysets import BUCKETS, LabelledQuery


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


def bucket_of(q: LabelledQuery) -> str:
    return q.bucket or ("covered" if q.expect == "answer" else "refuse")
