"""Replay of logged questions on another embedder, and the atomic switch-over."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from typer.testing import CliRunner

from citewise.answer.sentence_vectors import texts as sentence_texts
from citewise.calibrate.querysets import load_queries
from citewise.cli import app
from citewise.embedders.hashing import HashingEmbedder
from citewise.engine import Engine
from citewise.errors import QueryLogError, StoreError
from citewise.records import Answer
from citewise.stores.sentence_rows import text_key
from citewise.stores.sql import SQLStore
from citewise.stores.sqlite import open_sqlite
from citewise.telemetry.replay import replay, switch_over
from tests.helpers import SAMPLE, SAMPLE_QUERIES

TEST_SET = SAMPLE_QUERIES / "smoking-cessation.test.jsonl"


def ask_test_questions(engine: Engine, kb: Any, step: int = 1) -> None:
    """Every ``step``-th test question (covered, thin and out of scope alike)."""
    for q in load_queries(TEST_SET)[::step]:
        engine.ask(kb, q.query)


def live_state(store: SQLStore, kb_name: str) -> tuple[str, bytes]:
    kb = store.get_kb(kb_name)
    rows = store.db.conn.execute("SELECT vector FROM chunks WHERE kb_id = ? ORDER BY key", (kb.id,))
    return kb.config.to_json(), b"".join(r[0] for r in rows)


def test_same_embedder_uses_stored_query_embeddings(engine: Engine,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    kb = engine.open_kb("s", embedder="hashing:256")
    engine.ingest(kb, [SAMPLE])
    ask_test_questions(engine, kb, 5)
    before = live_state(engine.store, "s")

    def no(self: HashingEmbedder, texts: list[str], **kw: object) -> np.ndarray:
        raise AssertionError("the embedder must not be called")

    monkeypatch.setattr(HashingEmbedder, "embed", no)
    report = replay(engine.store, kb, "hashing:256", sample=8)
    assert report.same_embedder and len(report.questions) == 8
    assert report.chunks_embedded == 0 and report.questions_embedded == 0
    assert report.overlap_at_5 == 1.0
    assert report.flips("old") == {"answer_to_refusal": [], "refusal_to_answer": []}
    assert live_state(engine.store, "s") == before
    with pytest.raises(QueryLogError, match="already uses hashing:256"):
        switch_over(engine.store, kb, report)


class FailingCursor:
    """A transaction's cursor that fails on the statement writing the new configuration, i.e.
    after the switch has already overwritten every vector inside its transaction."""

    def __init__(self, cur: sqlite3.Cursor) -> None:
        self._cur = cur

    def execute(self, sql: str, *args: Any) -> Any:
        if sql.startswith("UPDATE kbs SET config"):
            raise sqlite3.OperationalError("disk I/O error (injected)")
        return self._cur.execute(sql, *args)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._cur, name)


@pytest.mark.slow
def test_replay_default_model_to_hashing_and_switch(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    store = open_sqlite(tmp_path / "kb.db")
    engine = Engine(store)
    kb = engine.open_kb("smoking")  # the default local model
    engine.ingest(kb, [SAMPLE])
    ask_test_questions(engine, kb, 3)
    asked = len(load_queries(TEST_SET)[::3])
    rated = store.query_log(kb)
    store.add_feedback(kb, rated[0].id, True)
    store.add_feedback(kb, rated[-1].id, False)
    before = live_state(store, "smoking")

    report = replay(store, kb, "hashing:256", labelled=load_queries(TEST_SET))
    assert not report.same_embedder and report.old_embedder == "local:all-MiniLM-L6-v2"
    assert len(report.questions) == asked and report.skipped == 0
    assert report.chunks_embedded == store.count_chunks(kb) and report.questions_embedded == asked
    assert 0.0 < report.overlap_at_5 < 1.0  # a bag-of-words hash retrieves differently
    flips = report.flips("old")
    assert flips["answer_to_refusal"]  # hashing cosines run lower than MiniLM's at 0.548
    old_answered = {q.log_id for q in report.questions if q.old.answer_old_threshold}
    assert set(flips["answer_to_refusal"]) <= old_answered
    assert report.new_gate.threshold == 0.5 and report.new_gate.source == "unmeasured"
    lab = report.labelled
    assert lab["queries"] == len(load_queries(TEST_SET)) and lab["old"]["recall_at_5"] > 0.9
    assert lab["old"]["refusal_rate_by_bucket"]["out_of_scope"] == 1.0
    assert report.feedback["rated"] == 2 and report.feedback["helpful"] == 1
    assert report.feedback["old"]["helpful_decision_kept"] == 1.0  # same model, same decision
    json.dumps(report.to_dict())
    # the live knowledge base is untouched: same configuration, same vectors, same answers
    assert live_state(store, "smoking") == before

    # a switch that fails inside its transaction leaves everything as it was
    begin = store.dialect.begin
    with monkeypatch.context() as m:
        m.setattr(store.dialect, "begin", lambda conn, write=True: FailingCursor(begin(conn, write)))
        with pytest.raises(StoreError, match="rolled back: disk I/O error \\(injected\\)"):
            switch_over(store, kb, report)
    assert live_state(store, "smoking") == before

    # documents changed after the replay: the switch refuses rather than mix two models
    (tmp_path / "extra").mkdir()
    (tmp_path / "extra" / "new.md").write_text("# New\n\n## Part\n\nNicotine gum can help.\n")
    engine.ingest(kb, [tmp_path / "extra"])
    changed = live_state(store, "smoking")
    with pytest.raises(QueryLogError, match="run `citewise replay` again"):
        switch_over(store, kb, report)
    assert live_state(store, "smoking") == changed

    report = replay(store, kb, "hashing:256", sample=5)
    switched = switch_over(store, kb, report)
    assert switched.config.embedder == "hashing:256" and switched.config.dim == 256
    assert switched.config.retrieval == kb.config.retrieval
    assert store.dense_index(switched).matrix.shape == (store.count_chunks(switched), 256)
    assert store.db.conn.execute("SELECT count(*) FROM shadow_vectors").fetchone()[0] == 0
    result = engine.ask(switched, "varenicline dose schedule days 1 to 3 once daily")
    assert isinstance(result, Answer)
    assert store.query_log(switched)[-1].embedder == "hashing:256"


@pytest.mark.heavy
def test_replay_command_and_switch(tmp_path: Path) -> None:
    runner = CliRunner()
    db = str(tmp_path / "kb.db")
    runner.invoke(app, ["--db", db, "ingest", "--kb", "s", "--embedder", "hashing:256", "-q", str(SAMPLE)])
    for q in load_queries(TEST_SET)[:6]:
        runner.invoke(app, ["--db", db, "ask", "--kb", "s", q.query])
    r = runner.invoke(app, ["--db", db, "replay", "--kb", "s", "--embedder", "hashing:128", "--json"])
    data = json.loads(r.output)
    assert data["questions"] == 6 and data["switched"] is False and data["new_embedder"] == "hashing:128"
    store = open_sqlite(db)
    assert store.db.conn.execute("SELECT count(*) FROM shadow_vectors").fetchone()[0] == 0
    store.close()
    assert {"overlap_at_5", "flips_old_threshold", "flips_new_threshold", "gate_pass_share",
            "labelled", "feedback", "details"} <= set(data)
    r = runner.invoke(app, ["--db", db, "replay", "--kb", "s", "--embedder", "hashing:128",
                            "--sample", "3", "--switch", "-q"])
    assert r.exit_code == 0 and "3 logged questions replayed" in r.output
    assert "switched s to hashing:128 (128 dims)" in r.output
    shown = json.loads(runner.invoke(app, ["--db", db, "kb", "show", "s", "--json"]).output)
    assert shown["config"]["embedder"] == "hashing:128"
    # the old embedder's sentence vectors went with the switch; the new one's were stored
    store = open_sqlite(db)
    kb = store.get_kb("s")
    chunks = store.chunks(kb, [int(k) for k in store.dense_index(kb).keys])
    assert store.chunks_without_sentences(kb, -1, 10) == []
    one = next(iter(chunks.values()))
    assert store.sentence_vectors(kb, [one.id])[one.id].keys == tuple(
        text_key("hashing:128", t) for t in sentence_texts(one))
    store.close()


def test_hashed_questions_replay_on_the_same_embedder_only(engine: Engine) -> None:
    import dataclasses

    from citewise.telemetry.log import with_policy

    kb = engine.open_kb("s", embedder="hashing:256")
    engine.ingest(kb, [SAMPLE])
    kb = engine.store.update_kb("s", dataclasses.replace(
        kb.config, log=with_policy(kb.config.log, hash_questions=True)))
    ask_test_questions(engine, kb, 20)
    same = replay(engine.store, kb, "hashing:256")
    asked = len(load_queries(TEST_SET)[::20])
    assert len(same.questions) == asked and all(q.question is None for q in same.questions)
    assert same.overlap_at_5 == 1.0 and same.questions_embedded == 0
    other = replay(engine.store, kb, "hashing:128")
    assert other.questions == () and other.skipped == asked and other.overlap_at_5 is None
