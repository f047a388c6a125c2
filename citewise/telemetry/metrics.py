"""Refusal-health metrics over the query log, their 24-hour moving average, and the alarm.

``kb_stats(store, kb)`` is the one function behind ``citewise stats``, the HTTP service's
Prometheus endpoint and the console's charts. It returns a frozen ``Stats``:

- ``overall``: ``Figures`` over every question since ``since``;
- ``hourly``: for each hour (newest last, at most ``series_hours``), ``Figures`` over the 24
  hours ending at the end of that hour (a 24-hour moving average sampled hourly);
- ``alarm``: the ``AlarmRule`` checked at ``now``;
- ``to_dict()`` (the ``stats --json`` object) and ``gauges()`` (flat ``name -> number`` for
  Prometheus, e.g. ``answered_share``, ``answered_share_24h``, ``alarm``).

``Figures``, all shares of the questions in the window (``None`` when there are none):
``answered_share``; ``refusal_share`` by path (``gate``, ``citation_check``,
``generation_failed``); ``empty_context_rate`` (nothing reached the context);
``mean_top1`` and ``mean_context_cosine`` (over questions with a non-empty context);
``hit_rate`` (helpful / rated, over questions with feedback); ``latency`` per stage as
``{"p50", "p95"}`` in milliseconds (numpy's linear-interpolation percentiles).
"""

from __future__ import annotations

import dataclasses
from bisect import bisect_left, bisect_right
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np

from citewise.kb import KnowledgeBase
from citewise.stores.base import LogEntry
from citewise.stores.roles import QueryLog
from citewise.telemetry.log import iso

STAGES = ("embed_ms", "dense_ms", "bm25_ms", "fuse_ms", "gate_ms", "generate_ms", "check_ms",
          "total_ms")
REFUSAL_PATHS = ("gate", "citation_check", "generation_failed")
WINDOW = timedelta(hours=24)


@dataclass(frozen=True)
class Figures:
    n: int
    answered_share: float | None
    refusal_share: dict[str, float] = field(hash=False)
    empty_context_rate: float | None
    mean_top1: float | None
    mean_context_cosine: float | None
    rated: int
    hit_rate: float | None
    latency: dict[str, dict[str, float]] = field(hash=False)


@dataclass(frozen=True)
class AlarmRule:
    """Fires when, over the last ``recent_hours``, the answered share is more than
    ``answered_drop_points`` percentage points below its level over the ``baseline_days``
    before them, or the mean top-1 cosine is more than ``top1_drop`` below it. Either window
    with fewer than ``min_questions`` questions leaves the alarm silent (and says so)."""

    answered_drop_points: float = 10.0
    top1_drop: float = 0.05
    recent_hours: int = 24
    baseline_days: int = 7
    min_questions: int = 20


@dataclass(frozen=True)
class Alarm:
    firing: bool
    reasons: tuple[str, ...]
    recent: Figures
    baseline: Figures
    rule: AlarmRule


@dataclass(frozen=True)
class Stats:
    kb: str
    since: str | None
    now: str
    overall: Figures
    hourly: tuple[tuple[str, Figures], ...]  # (hour start, 24 h ending at that hour's end)
    alarm: Alarm

    def to_dict(self) -> dict[str, Any]:
        return {
            "kb": self.kb, "since": self.since, "now": self.now,
            "overall": dataclasses.asdict(self.overall),
            "moving_24h": [{"hour": h, **dataclasses.asdict(f)} for h, f in self.hourly],
            "alarm": {"firing": self.alarm.firing, "reasons": list(self.alarm.reasons),
                      "recent": dataclasses.asdict(self.alarm.recent),
                      "baseline": dataclasses.asdict(self.alarm.baseline),
                      "rule": dataclasses.asdict(self.alarm.rule)},
        }

    def gauges(self) -> dict[str, float]:
        """Flat numbers for a metrics endpoint; ``None`` figures are left out."""
        out: dict[str, float] = {"alarm": float(self.alarm.firing)}
        for suffix, f in (("", self.overall), ("_24h", self.alarm.recent)):
            out[f"questions{suffix}"] = float(f.n)
            for name in ("answered_share", "empty_context_rate", "mean_top1",
                         "mean_context_cosine", "hit_rate"):
                value = getattr(f, name)
                if value is not None:
                    out[name + suffix] = float(value)
            for path, share in f.refusal_share.items():
                out[f"refusal_share_{path}{suffix}"] = share
            for stage, q in f.latency.items():
                for p, v in q.items():
                    out[f"latency_{stage.removesuffix('_ms')}_{p}_ms{suffix}"] = v
        return out


def _signals(record: dict[str, Any]) -> tuple[float, float, int]:
    """(top1, mean, n_context) from a record; version-1 records derive them from ``chunks``."""
    s = record.get("gate", {}).get("signals")
    if s is not None:
        return float(s["top1"]), float(s["mean"]), int(s["n_context"])
    cos = [float(c["cosine"]) for c in record.get("chunks", [])]
    return (max(cos) if cos else 0.0), (float(np.mean(cos)) if cos else 0.0), len(cos)


def figures(entries: Sequence[LogEntry]) -> Figures:
    """The metrics of a set of log entries (module docstring)."""
    n = len(entries)
    if n == 0:
        return Figures(0, None, {}, None, None, None, 0, None, {})
    paths = [e.path or e.record.get("path", "") for e in entries]
    answered = sum(p == "answered" for p in paths)
    refusals = {p: round(sum(q == p for q in paths) / n, 6)
                for p in dict.fromkeys([*REFUSAL_PATHS, *paths]) if p != "answered"}
    sig = [_signals(e.record) for e in entries]
    with_context = [s for s in sig if s[2] > 0]
    rated = [e.feedback for e in entries if e.feedback is not None]
    latency: dict[str, dict[str, float]] = {}
    for stage in STAGES:
        values = [e.record.get("timings", {}).get(stage) for e in entries]
        present = [float(v) for v in values if v is not None]
        if present:
            p50, p95 = np.percentile(present, [50, 95])
            latency[stage] = {"p50": round(float(p50), 3), "p95": round(float(p95), 3)}

    def mean(xs: list[float]) -> float | None:
        return round(float(np.mean(xs)), 6) if xs else None

    return Figures(
        n, round(answered / n, 6), refusals, round(1 - len(with_context) / n, 6),
        mean([s[0] for s in with_context]), mean([s[1] for s in with_context]),
        len(rated), round(sum(rated) / len(rated), 6) if rated else None, latency,
    )


def _parse(ts: str) -> datetime:
    return datetime.fromisoformat(ts)


def check_alarm(entries: Sequence[LogEntry], now: datetime, rule: AlarmRule) -> Alarm:
    """The rule over entries sorted by time (``AlarmRule``)."""
    times = [e.created_at for e in entries]
    recent_start = now - timedelta(hours=rule.recent_hours)
    base_start = recent_start - timedelta(days=rule.baseline_days)

    def window(a: datetime, b: datetime) -> Figures:
        lo = bisect_right(times, iso(a) or "")
        hi = bisect_right(times, iso(b) or "")
        return figures(entries[lo:hi])

    recent, baseline = window(recent_start, now), window(base_start, recent_start)
    reasons: list[str] = []
    if recent.n < rule.min_questions or baseline.n < rule.min_questions:
        reasons.append(f"not enough questions to judge ({recent.n} in the last "
                       f"{rule.recent_hours} h, {baseline.n} in the {rule.baseline_days} days "
                       f"before; {rule.min_questions} needed in each)")
        return Alarm(False, tuple(reasons), recent, baseline, rule)
    firing = False
    assert recent.answered_share is not None and baseline.answered_share is not None
    drop = (baseline.answered_share - recent.answered_share) * 100
    if drop > rule.answered_drop_points:
        firing = True
        reasons.append(f"answered share {recent.answered_share:.1%} over the last "
                       f"{rule.recent_hours} h is {drop:.1f} points below its "
                       f"{rule.baseline_days}-day level {baseline.answered_share:.1%}")
    if recent.mean_top1 is not None and baseline.mean_top1 is not None:
        fall = baseline.mean_top1 - recent.mean_top1
        if fall > rule.top1_drop:
            firing = True
            reasons.append(f"mean top-1 cosine {recent.mean_top1:.3f} is {fall:.3f} below its "
                           f"{rule.baseline_days}-day level {baseline.mean_top1:.3f}")
    return Alarm(firing, tuple(reasons), recent, baseline, rule)


def compute_stats(kb_name: str, entries: Sequence[LogEntry], now: datetime,
                  since: str | None = None, rule: AlarmRule | None = None,
                  series_hours: int = 168) -> Stats:
    """Stats from entries sorted by time (all of them may be older than ``since``: the alarm
    looks back ``recent_hours + baseline_days`` whatever ``since`` says)."""
    rule = rule or AlarmRule()
    times = [e.created_at for e in entries]
    now_text = iso(now) or ""
    upto = bisect_right(times, now_text)
    entries, times = list(entries[:upto]), times[:upto]
    start = bisect_left(times, since) if since else 0
    shown = entries[start:]
    hourly: list[tuple[str, Figures]] = []
    if shown:
        first = _parse(shown[0].created_at).replace(minute=0, second=0, microsecond=0)
        last = now.replace(minute=0, second=0, microsecond=0)
        hour = max(first, last - timedelta(hours=series_hours - 1))
        while hour <= last:
            end = min(hour + timedelta(hours=1), now)
            lo = bisect_right(times, iso(end - WINDOW) or "")
            hi = bisect_right(times, iso(end) or "")
            hourly.append((iso(hour) or "", figures(entries[lo:hi])))
            hour += timedelta(hours=1)
    return Stats(kb_name, since, now_text, figures(shown), tuple(hourly),
                 check_alarm(entries, now, rule))


def kb_stats(store: QueryLog, kb: KnowledgeBase, since: str | datetime | None = None,
             now: datetime | None = None, rule: AlarmRule | None = None,
             series_hours: int = 168) -> Stats:
    """The figures for one knowledge base, read from its query log (module docstring)."""
    now = now or datetime.now(UTC)
    rule = rule or AlarmRule()
    since_text = iso(since)
    lookback = iso(now - timedelta(hours=rule.recent_hours, days=rule.baseline_days))
    entries = store.query_log(kb, since=min(since_text, lookback or "") if since_text else None)
    return compute_stats(kb.name, entries, now, since_text, rule, series_hours)
