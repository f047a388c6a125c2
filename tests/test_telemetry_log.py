"""What each path of ``ask`` writes to the query log; hashing, retention, export, the CLI."""

from __future__ import annotations

import dataclasses
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from citewise.cli import app
from citewise.embedders import get_embedder
from citewise.engine import Engine
from citewise.kb import KnowledgeBase
from citewise.records import Answer, Refusal
from citewise.telemetry.log import HASH_PREFIX, SALT_ENV, export_jsonl, export_parquet, with_policy
from tests.helpers import SAMPLE

COVERED = "varenicline dose schedule days 1 to 3 once daily"
OFF_TOPIC = "quantum chromodynamics lattice gauge"
RETRIEVAL_STAGES = {"embed_ms", "dense_ms", "bm25_ms", "fuse_ms", "gate_ms", "total_ms"}


@pytest.fixture
def kb(engine: Engine) -> KnowledgeBase:
    kb = engine.open_kb("s", embedder="hashing:256")
    engine.ingest(kb, [SAMPLE])
    return kb


def last(engine: Engine, kb: KnowledgeBase):
    return engine.store.query_log(kb, embeddings=True)[-1]


def check_common(engine: Engine, kb: KnowledgeBase, question: str) -> dict:
    entry = last(engine, kb)
    r = entry.record
    assert r["v"] == 2 and r["kb"] == "s" and r["question"] == question == entry.question
    assert r["embedder"] == entry.embedder == "hashing:256"
    np.testing.assert_allclose(entry.embedding, get_embedder("hashing:256").embed([question])[0])
    assert datetime.fromisoformat(r["time"]).tzinfo is not None
    cands = r["candidates"]
    assert cands and set(cands[0]) == {"doc_id", "chunk_id", "section", "cosine", "bm25", "rrf",
                                       "dense_rank", "bm25_rank", "in_context"}
    assert [c["rrf"] for c in cands] == sorted((c["rrf"] for c in cands), reverse=True)
    assert sum(c["in_context"] for c in cands) == r["gate"]["signals"]["n_context"] == 8
    assert r["gate"]["signals"]["top1"] == pytest.approx(max(c["cosine"] for c in cands), abs=1e-4)
    in_context = [c["cosine"] for c in cands if c["in_context"]]
    assert r["gate"]["signals"]["mean"] == pytest.approx(np.mean(in_context), abs=2e-4)
    signals = r["gate"]["signals"]
    assert set(signals) == {"top1", "mean", "n_context", "coverage", "pool", "margin",
                            "sentence_terms", "sentence_cosine", "agreement", "kb_terms", "answerable"}
    assert signals["margin"] == pytest.approx(signals["top1"] - signals["pool"], abs=2e-4)
    assert r["gate"]["threshold"] == 0.5 and r["gate"]["policy"] == "top1"
    assert set(r["timings"]) >= RETRIEVAL_STAGES
    assert "chunks" not in r  # chunk texts stay in the chunk table, ids point at them
    return r


def test_answered_path(engine: Engine, kb: KnowledgeBase) -> None:
    result = engine.ask(kb, COVERED)
    assert isinstance(result, Answer)
    r = check_common(engine, kb, COVERED)
    assert r["path"] == "answered" == last(engine, kb).path and r["status"] == "answered"
    assert r["gate"]["answer"] is True and r["generator"] == "extractive"
    assert r["answer"] == result.text and r["reason"] is None
    assert [c["chunk_id"] for c in r["citations"]] == [c.chunk_id for c in result.citations]
    assert {"generate_ms", "check_ms"} <= set(r["timings"])


def test_refused_by_gate(engine: Engine, kb: KnowledgeBase) -> None:
    result = engine.ask(kb, OFF_TOPIC, generator="scripted:error:must not be called")
    assert isinstance(result, Refusal) and result.path == "gate"
    r = check_common(engine, kb, OFF_TOPIC)
    assert r["path"] == "gate" and r["status"] == "refused" and r["gate"]["answer"] is False
    assert "below the threshold" in r["gate"]["reason"] and r["generator"] is None
    assert r["answer"] is None and r["citations"] == [] and r["related"]
    assert "generate_ms" not in r["timings"]


def test_refused_after_citation_check(engine: Engine, kb: KnowledgeBase) -> None:
    result = engine.ask(kb, COVERED, generator="scripted:Varenicline cures every smoker in a week.")
    assert isinstance(result, Refusal) and result.path == "citation_check"
    r = check_common(engine, kb, COVERED)
    assert r["path"] == "citation_check" and r["gate"]["answer"] is True
    assert r["generator"] == "scripted:Varenicline cures every smoker in a week."
    assert r["reason"].startswith("The passages found do not clearly answer your question")
    assert r["dropped"] == [{"sentence": "Varenicline cures every smoker in a week.",
                             "reason": "it cites no passage"}]
    assert {"generate_ms", "check_ms"} <= set(r["timings"])


def test_generation_failed(engine: Engine, kb: KnowledgeBase) -> None:
    result = engine.ask(kb, COVERED, generator="scripted:error:provider timed out")
    assert isinstance(result, Refusal) and result.path == "generation_failed"
    r = check_common(engine, kb, COVERED)
    assert r["path"] == "generation_failed" and "provider timed out" in r["reason"]
    assert "generate_ms" in r["timings"] and "check_ms" not in r["timings"]


def test_hashed_questions_never_reach_the_store(engine: Engine, kb: KnowledgeBase,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    policy = with_policy(kb.config.log, hash_questions=True, keep_embeddings=False)
    assert len(policy.salt) == 32
    kb = engine.store.update_kb("s", dataclasses.replace(kb.config, log=policy))
    engine.ask(kb, COVERED)
    engine.ask(kb, COVERED)
    a, b = engine.store.query_log(kb, embeddings=True)
    assert a.question.startswith(HASH_PREFIX) and a.question == b.question
    assert a.record["question"] is None and a.record["question_hash"] == a.question
    assert a.embedding is None
    dump = engine.store.db.conn.execute("SELECT question, record FROM query_log").fetchall()
    assert "varenicline dose schedule" not in json.dumps(dump)
    monkeypatch.setenv(SALT_ENV, "a key kept outside the store")
    engine.ask(kb, COVERED)
    assert last(engine, kb).question.startswith(HASH_PREFIX)
    assert last(engine, kb).question != a.question


def test_retention_deletes_old_entries_as_new_ones_arrive(engine: Engine, kb: KnowledgeBase) -> None:
    old = (datetime.now(UTC) - timedelta(days=40)).isoformat(timespec="seconds")
    recent = (datetime.now(UTC) - timedelta(days=2)).isoformat(timespec="seconds")
    for t in (old, recent):
        engine.store.log_query(kb, {"question": t, "status": "answered", "time": t}, None)
    kb = engine.store.update_kb("s", dataclasses.replace(
        kb.config, log=with_policy(kb.config.log, retention_days=30)))
    engine.ask(kb, OFF_TOPIC)
    assert [e.question for e in engine.store.query_log(kb)] == [recent, OFF_TOPIC]


def test_export_jsonl_and_parquet(engine: Engine, kb: KnowledgeBase, tmp_path: Path) -> None:
    import pyarrow.parquet as pq

    engine.ask(kb, COVERED)
    engine.ask(kb, OFF_TOPIC)
    first = engine.store.query_log(kb)[0].id
    engine.store.add_feedback(kb, first, True, "spot on")
    entries = engine.store.query_log(kb, embeddings=True)
    assert export_jsonl(entries, tmp_path / "log.jsonl") == 2
    rows = [json.loads(line) for line in (tmp_path / "log.jsonl").read_text().splitlines()]
    assert [r["path"] for r in rows] == ["answered", "gate"]
    assert rows[0]["feedback"] is True and rows[0]["feedback_note"] == "spot on"
    assert len(rows[0]["embedding"]) == 256 and rows[1]["feedback"] is None
    assert export_parquet(entries, tmp_path / "log.parquet") == 2
    table = pq.read_table(tmp_path / "log.parquet").to_pylist()
    assert [r["path"] for r in table] == ["answered", "gate"] and table[0]["feedback"] is True
    assert table[0]["top1"] == rows[0]["gate"]["signals"]["top1"]
    assert json.loads(table[0]["candidates"]) == rows[0]["candidates"]
    np.testing.assert_allclose(table[1]["embedding"], rows[1]["embedding"], rtol=1e-6)


def test_log_commands(tmp_path: Path) -> None:
    runner = CliRunner()
    db = tmp_path / "kb.db"

    def cli(*args: str):
        return runner.invoke(app, ["--db", str(db), *args], catch_exceptions=False)

    cli("ingest", "--kb", "s", "--embedder", "hashing:256", "-q", str(SAMPLE))
    cli("ingest", "--kb", "t", "--embedder", "hashing:256", "-q", str(SAMPLE))
    cli("ask", "--kb", "s", COVERED)
    assert "#1\t" in cli("log", "tail", "--kb", "s").output
    assert cli("log", "feedback", "1", "--kb", "s", "--helpful").exit_code == 0
    r = runner.invoke(app, ["--db", str(db), "log", "feedback", "1", "--kb", "t", "--unhelpful"])
    assert r.exit_code != 0
    out = json.loads(cli("log", "settings", "--kb", "s", "--hash-questions", "--retention-days", "7",
                         "--json").output)
    assert out == {"retention_days": 7, "hash_questions": True, "keep_embeddings": True, "purged": 0}
    cli("ask", "--kb", "s", OFF_TOPIC)
    assert "wrote 2 log entries" in cli("log", "export", str(tmp_path / "l.parquet"), "--kb", "s").output
    assert "wrote 2 log entries" in cli("log", "export", str(tmp_path / "l.jsonl"), "--kb", "s").output
    lines = (tmp_path / "l.jsonl").read_text().splitlines()
    assert json.loads(lines[1])["question"] is None and json.loads(lines[0])["feedback"] is True
