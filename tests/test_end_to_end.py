"""``eval`` and ``calibrate`` count what ``ask`` returns, not only the gate: on the sample
collection (hashing embedder) with its labelled train and test questions, a refusal at the
citation check is a refusal end to end, counted where it happened."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from typer.testing import CliRunner

from citewise.calibrate.calibration import clopper_pearson
from citewise.calibrate.querysets import load_queries
from citewise.cli import app
from citewise.engine import Engine
from citewise.records import Answer
from citewise.stores.sqlite import open_sqlite
from tests.helpers import SAMPLE, SAMPLE_QUERIES

pytestmark = pytest.mark.heavy  # servers, processes, deadlines or megabytes: make test, not make unit

TRAIN = SAMPLE_QUERIES / "smoking-cessation.train.jsonl"
TEST = SAMPLE_QUERIES / "smoking-cessation.test.jsonl"
# a draft the citation check must refuse whatever the question: a number no passage holds
UNSUPPORTED = "scripted:Quitting cures every smoker of every disease within 3 hours [1]."
runner = CliRunner()


def cli(db: Path, *args: str) -> dict:
    r = runner.invoke(app, ["--db", str(db), *args], catch_exceptions=False)
    assert r.exit_code == 0, r.output
    return json.loads(r.output) if "--json" in args else {"text": r.output}


@pytest.fixture
def db(tmp_path: Path) -> Path:
    """The sample ingested and its gate calibrated on the train split, as the README does."""
    db = tmp_path / "kb.db"
    cli(db, "ingest", "--kb", "s", "--embedder", "hashing:256", "-q", str(SAMPLE))
    cli(db, "calibrate", "--kb", "s", str(TRAIN), "--gate-only", "-q")
    return db


def use_generator(db: Path, spec: str) -> None:
    store = open_sqlite(db)
    kb = store.get_kb("s")
    store.update_kb("s", replace(kb.config, generator=spec))
    store.close()


def test_refusals_at_the_citation_check_are_counted_end_to_end(db: Path) -> None:
    gate_only = cli(db, "eval", "--kb", "s", str(TEST), "--mode", "hybrid", "--gate-only", "--json")
    assert gate_only["end_to_end"] is None
    use_generator(db, UNSUPPORTED)
    out = cli(db, "eval", "--kb", "s", str(TEST), "--mode", "hybrid", "--json")
    gate, e2e = out["gate"]["buckets"], out["end_to_end"]
    assert gate == gate_only["gate"]["buckets"]  # the gate decides as it does alone
    assert e2e["generator"] == UNSUPPORTED and e2e["answered"] == 0
    assert sum(g["n"] - g["refused"] for g in gate.values()) > 0  # the gate let some through
    for bucket, g in gate.items():
        b = e2e["buckets"][bucket]
        # every question the gate let through was refused at the check, and counted as refused
        assert (b["n"], b["refused"], b["refusal_rate"]) == (g["n"], g["n"], 1.0)
        assert b["refused_at"] == {"gate": g["refused"], "citation_check": g["n"] - g["refused"],
                                   "generation_failed": 0}
        assert (b["low"], b["high"]) == tuple(round(x, 4) for x in clopper_pearson(g["n"], g["n"]))
    assert e2e["refused_at"]["citation_check"] == sum(g["n"] - g["refused"] for g in gate.values())
    assert e2e["covered_answered_with_source"] == 0.0

    cal = cli(db, "calibrate", "--kb", "s", str(TRAIN), "--no-save", "-q", "--json")
    chosen = {b["bucket"]: b for b in cal["buckets"]}
    for bucket, b in cal["end_to_end"]["buckets"].items():
        assert b["refused"] == b["n"] == chosen[bucket]["n"]
        assert b["refused_at"]["gate"] == chosen[bucket]["refused"]
        assert b["refused_at"]["citation_check"] == b["n"] - chosen[bucket]["refused"]


def test_end_to_end_is_what_ask_returns_and_leaves_the_log_alone(db: Path) -> None:
    out = cli(db, "eval", "--kb", "s", str(TEST), "--mode", "hybrid", "--json")
    engine = Engine(open_sqlite(db))
    kb = engine.store.get_kb("s")
    assert engine.store.query_log(kb) == []  # eval asked 60 questions without logging them
    seen: dict[str, dict[str, int]] = {}
    with_source = covered = 0
    for q in load_queries(TEST):
        result = engine.ask(kb, q.query)
        where = "answered" if isinstance(result, Answer) else result.path
        counts = seen.setdefault(str(q.bucket), {})
        counts[where] = counts.get(where, 0) + 1
        if q.expect == "answer":
            covered += 1
            with_source += isinstance(result, Answer) and any(
                c.doc_id in q.relevant for c in result.citations)
    e2e = out["end_to_end"]
    for bucket, counts in seen.items():
        b = e2e["buckets"][bucket]
        assert b["refused"] == sum(n for w, n in counts.items() if w != "answered")
        assert {w: n for w, n in b["refused_at"].items() if n} == \
            {w: n for w, n in counts.items() if w != "answered"}
        assert b["refused_at"]["gate"] == out["gate"]["buckets"][bucket]["refused"]
    assert e2e["covered_answered_with_source"] == round(with_source / covered, 4)
    assert 0 < with_source < covered


def test_the_tables_show_the_gate_alone_and_end_to_end(db: Path) -> None:
    use_generator(db, UNSUPPORTED)
    text = cli(db, "eval", "--kb", "s", str(TEST), "--mode", "hybrid", "-q")["text"]
    assert "gate only" in text and "end to end" in text and "refused at" in text
    covered = next(line for line in text.splitlines() if line.startswith("covered "))
    n = str(sum(q.bucket == "covered" for q in load_queries(TEST)))
    assert covered.split()[1] == n and "100.0%" in covered  # end to end: all refused
    assert f"covered questions answered citing a labelled source: 0/{n}" in text
    text = cli(db, "calibrate", "--kb", "s", str(TRAIN), "--no-save", "-q")["text"]
    assert "end to end" in text and "check" in text
    assert "end to end" not in cli(db, "eval", "--kb", "s", str(TEST), "--mode", "hybrid", "-q",
                                   "--gate-only")["text"]
