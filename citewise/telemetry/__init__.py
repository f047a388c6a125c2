"""Telemetry: the query log's content, refusal-health metrics with an alarm, and replay.

- ``log``: what each question writes, hashing of questions, JSONL / Parquet export;
- ``metrics``: ``kb_stats`` (the figures behind ``citewise stats`` and the metrics endpoint),
  the 24-hour moving average, ``AlarmRule``;
- ``replay``: ``replay`` logged questions against a new embedder, ``switch_over`` atomically
  (it drives the engine, so it is imported from ``citewise.telemetry.replay``, not here).
"""

from __future__ import annotations

from citewise.telemetry.metrics import Alarm, AlarmRule, Figures, Stats, compute_stats, kb_stats

__all__ = ["Alarm", "AlarmRule", "Figures", "Stats", "compute_stats", "kb_stats"]
