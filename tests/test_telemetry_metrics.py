"""The metric arithmetic on a fixed log (values worked out by hand), the moving average, the
alarm on a replayed synthetic drift, and ``citewise stats``."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from citewise.cli import app
from citewise.kb import KnowledgeBase
from citewise.stores.sql import SQLStore
from citewise.stores.sqlite import open_sqlite
from citewise.telemetry import AlarmRule, kb_stats
from tests.helpers import hashing_config

T0 = datetime(2026, 11, 1, 0, 0, tzinfo=UTC)


def put(store: SQLStore, kb: KnowledgeBase, at: datetime, path: str, top1: float, mean: float,
        n_context: int = 8, total_ms: float = 10.0, feedback: bool | None = None) -> int:
    record = {"time": at.isoformat(timespec="seconds"), "question": f"q at {at}", "path": path,
              "status": "answered" if path == "answered" else "refused",
              "gate": {"signals": {"top1": top1, "mean": mean, "n_context": n_context}},
              "timings": {"embed_ms": total_ms / 10, "total_ms": total_ms}}
    log_id = store.log_query(kb, record, np.ones(4, np.float32))
    if feedback is not None:
        store.add_feedback(kb, log_id, feedback)
    return log_id


@pytest.fixture
def fixed(store: SQLStore) -> KnowledgeBase:
    kb = store.create_kb("m", hashing_config())
    h = timedelta(hours=1)
    put(store, kb, T0, "answered", 0.8, 0.6, total_ms=10, feedback=True)
    put(store, kb, T0 + h, "answered", 0.6, 0.4, total_ms=20, feedback=False)
    put(store, kb, T0 + 2 * h, "gate", 0.3, 0.2, total_ms=30)
    put(store, kb, T0 + 30 * h, "gate", 0.0, 0.0, n_context=0, total_ms=40)
    put(store, kb, T0 + 31 * h, "citation_check", 0.7, 0.5, total_ms=50, feedback=True)
    return kb


def test_figures_on_a_fixed_log(store: SQLStore, fixed: KnowledgeBase) -> None:
    now = T0 + timedelta(hours=31, minutes=30)
    s = kb_stats(store, fixed, now=now)
    o = s.overall
    assert o.n == 5
    assert o.answered_share == 0.4  # 2 of 5
    assert o.refusal_share == {"gate": 0.4, "citation_check": 0.2, "generation_failed": 0.0}
    assert o.empty_context_rate == 0.2  # the one with nothing in its context
    assert o.mean_top1 == pytest.approx((0.8 + 0.6 + 0.3 + 0.7) / 4)  # 0.6, empty one left out
    assert o.mean_context_cosine == pytest.approx((0.6 + 0.4 + 0.2 + 0.5) / 4)  # 0.425
    assert (o.rated, o.hit_rate) == (3, pytest.approx(2 / 3, abs=1e-6))
    # total_ms 10, 20, 30, 40, 50: median 30; p95 at rank 0.95 * 4 = 3.8 -> 40 + 0.8 * 10 = 48
    assert o.latency["total_ms"] == {"p50": 30.0, "p95": 48.0}
    assert o.latency["embed_ms"] == {"p50": 3.0, "p95": 4.8}
    # hourly 24-hour moving average from the first question's hour to now's: 32 points
    hours = dict(s.hourly)
    assert len(s.hourly) == 32 and s.hourly[0][0] == T0.isoformat()
    assert hours[(T0 + timedelta(hours=2)).isoformat()].n == 3
    at_24 = hours[(T0 + timedelta(hours=24)).isoformat()]  # (01:00, 01:00 next day]: the gate one
    assert at_24.n == 1 and at_24.answered_share == 0.0
    assert hours[(T0 + timedelta(hours=25)).isoformat()].answered_share is None  # nobody asked
    last = s.hourly[-1][1]  # (07:30, 07:30 next day]: the two late questions
    assert last.n == 2 and last.answered_share == 0.0 and last.empty_context_rate == 0.5
    assert last.mean_top1 == pytest.approx(0.7) and last.hit_rate == 1.0
    assert hours[(T0 + timedelta(hours=10)).isoformat()].answered_share == pytest.approx(2 / 3)
    # --since keeps the moving average (it looks back) but narrows the overall figures
    narrow = kb_stats(store, fixed, since=(T0 + timedelta(hours=2)).isoformat(), now=now)
    assert narrow.overall.n == 3 and len(narrow.hourly) == 30
    g = s.gauges()
    assert g["answered_share"] == 0.4 and g["latency_total_p95_ms"] == 48.0
    assert g["questions_24h"] == 2 and g["alarm"] == 0.0
    assert json.loads(json.dumps(s.to_dict()))["overall"]["n"] == 5


def drift(store: SQLStore, now: datetime, recent_answered: float, recent_top1: float) -> KnowledgeBase:
    """Eight days of hourly questions: the 7 days before the last 24 h answer 90% with a mean
    top-1 of 0.70; the last 24 h answer ``recent_answered`` with top-1 ``recent_top1``."""
    kb = store.create_kb(f"d{len(store.list_kbs())}", hashing_config())
    for i in range(8 * 24):
        at = now - timedelta(hours=8 * 24 - i) + timedelta(minutes=30)
        recent = at > now - timedelta(hours=24)
        share, top1 = (recent_answered, recent_top1) if recent else (0.9, 0.7)
        # ten-question cycle: the first round(share * 10) of every ten are answered
        answered = (i % 10) < round(share * 10)
        put(store, kb, at, "answered" if answered else "gate", top1, top1 - 0.2)
    return kb


def test_alarm_fires_on_a_drop_in_answered_share(store: SQLStore) -> None:
    now = datetime.now(UTC).replace(microsecond=0)
    kb = drift(store, now, recent_answered=0.7, recent_top1=0.7)
    a = kb_stats(store, kb, now=now).alarm
    assert a.firing and len(a.reasons) == 1 and "answered share" in a.reasons[0]
    assert a.baseline.answered_share == pytest.approx(0.9, abs=0.01)
    assert a.recent.n == 24 and a.recent.answered_share == pytest.approx(0.7, abs=0.05)
    # a looser rule tolerates the same drop
    assert not kb_stats(store, kb, now=now, rule=AlarmRule(answered_drop_points=30)).alarm.firing


def test_alarm_fires_on_a_fall_in_top1_cosine(store: SQLStore) -> None:
    now = datetime.now(UTC).replace(microsecond=0)
    kb = drift(store, now, recent_answered=0.9, recent_top1=0.6)
    a = kb_stats(store, kb, now=now).alarm
    assert a.firing and len(a.reasons) == 1 and "top-1 cosine" in a.reasons[0]
    assert kb_stats(store, kb, now=now).gauges()["alarm"] == 1.0


def test_alarm_is_quiet_when_steady_or_too_few(store: SQLStore) -> None:
    now = datetime.now(UTC).replace(microsecond=0)
    steady = drift(store, now, recent_answered=0.9, recent_top1=0.68)
    a = kb_stats(store, steady, now=now).alarm
    assert not a.firing and a.reasons == ()
    few = store.create_kb("few", hashing_config())
    put(store, few, now - timedelta(hours=1), "gate", 0.1, 0.1)
    a = kb_stats(store, few, now=now).alarm
    assert not a.firing and "not enough questions" in a.reasons[0]


def test_stats_command(tmp_path: Path) -> None:
    store = open_sqlite(tmp_path / "kb.db")
    now = datetime.now(UTC).replace(microsecond=0)
    drift(store, now, recent_answered=0.5, recent_top1=0.7)
    store.close()
    runner = CliRunner()
    out = runner.invoke(app, ["--db", str(tmp_path / "kb.db"), "stats", "--kb", "d0", "--json"])
    data = json.loads(out.output)
    assert data["alarm"]["firing"] and data["overall"]["n"] == 192
    assert set(data["moving_24h"][0]) >= {"hour", "n", "answered_share", "latency"}
    text = runner.invoke(app, ["--db", str(tmp_path / "kb.db"), "stats", "--kb", "d0"]).output
    assert "alarm: FIRING" in text and "24-hour moving average" in text
