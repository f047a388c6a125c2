"""Metric functions against hand-computed values, and ``citewise eval`` end to end on a
reduced SciFact slice and on the sample collection's labelled questions (hashing embedder)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from typer.testing import CliRunner

from citewise.calibrate.evaluation import (
    check_modes,
    documents,
    hit_at,
    mrr_at,
    ndcg_at,
    recall_at,
    score,
)
from citewise.cli import app
from citewise.errors import UnknownNameError
from citewise.records import Candidate, Chunk
from tests.helpers import SAMPLE, SAMPLE_QUERIES

pytestmark = pytest.mark.heavy  # servers, processes, deadlines or megabytes: make test, not make unit

SLICE = Path(__file__).parent / "data" / "scifact-slice"
runner = CliRunner()

RANKED = ["a", "b", "c", "d", "e"]
GRADED = {"b": 1, "d": 2, "z": 1, "n": 0}  # z is never retrieved; n is judged not relevant


def test_recall_and_hit_at_k() -> None:
    assert recall_at(RANKED, GRADED, 1) == 0.0
    assert recall_at(RANKED, GRADED, 2) == pytest.approx(1 / 3)
    assert recall_at(RANKED, GRADED, 5) == pytest.approx(2 / 3)
    assert hit_at(RANKED, GRADED, 1) == 0.0
    assert hit_at(RANKED, GRADED, 2) == 1.0
    assert recall_at(RANKED, {"n": 0}, 5) == 0.0  # nothing relevant: 0, not a division error


def test_mrr_is_cut_at_k() -> None:
    assert mrr_at(RANKED, GRADED, 10) == 0.5
    assert mrr_at(RANKED, {"e": 1}, 10) == 0.2
    assert mrr_at(RANKED, {"e": 1}, 4) == 0.0
    assert mrr_at(RANKED, {"a": 0}, 10) == 0.0


def test_ndcg_with_graded_relevance() -> None:
    # DCG = 1/log2(3) + 2/log2(5); ideal order d(2), b(1), z(1): 2/log2(2) + 1/log2(3) + 1/log2(4)
    dcg = 1 / math.log2(3) + 2 / math.log2(5)
    idcg = 2 + 1 / math.log2(3) + 0.5
    assert ndcg_at(RANKED, GRADED, 10) == pytest.approx(dcg / idcg)
    assert ndcg_at(RANKED, GRADED, 10) == pytest.approx(0.4766, abs=1e-4)
    assert ndcg_at(["d", "b", "z"], GRADED, 10) == pytest.approx(1.0)
    assert ndcg_at(["x", "y"], GRADED, 10) == 0.0
    # the cut applies to the ideal list too: with k=1 only the best grade counts
    assert ndcg_at(["b"], GRADED, 1) == pytest.approx(0.5)


def test_score_names_every_metric() -> None:
    s = score(RANKED, {"a": 1})
    assert s == {"recall@1": 1.0, "recall@5": 1.0, "recall@10": 1.0, "hit@5": 1.0,
                 "mrr@10": 1.0, "ndcg@10": 1.0}


def test_a_document_counts_once_at_its_best_chunk() -> None:
    def cand(doc: str, n: int) -> Candidate:
        return Candidate(Chunk(doc, n, (), f"text {doc} {n}"), 0.5)

    chunks = [cand("x", 0), cand("y", 0), cand("x", 1), cand("z", 0)]
    assert documents(chunks) == ["x", "y", "z"]
    assert recall_at(documents(chunks), {"z": 1}, 2) == 0.0  # a duplicate does not take a rank


def test_unknown_mode_lists_the_valid_ones() -> None:
    with pytest.raises(UnknownNameError, match="bm25, dense, hybrid, hybrid\\+mmr"):
        check_modes(["hybrid", "splade"])


def cli(db: Path, *args: str):
    return runner.invoke(app, ["--db", str(db), *args], catch_exceptions=False)


def test_eval_on_a_scifact_slice_with_beir_queries(tmp_path: Path) -> None:
    db = tmp_path / "kb.db"
    r = cli(db, "ingest", "--kb", "sf", "--embedder", "hashing:256", "-q", str(SLICE / "corpus.jsonl"))
    assert "200 added" in r.output
    r = cli(db, "eval", "--kb", "sf", str(SLICE / "queries.jsonl"), "--qrels", str(SLICE / "qrels.tsv"),
            "--json")
    assert r.exit_code == 0, r.output
    out = json.loads(r.output)
    assert (out["queries"], out["judged"]) == (40, 40)
    assert list(out["modes"]) == ["dense", "bm25", "hybrid", "hybrid+mmr"]
    for metrics in out["modes"].values():
        assert list(metrics) == ["recall@1", "recall@5", "recall@10", "hit@5", "mrr@10", "ndcg@10"]
        assert metrics["recall@1"] <= metrics["recall@5"] <= metrics["recall@10"]
    # 40 claims against 200 abstracts: word overlap alone finds most cited abstracts
    assert out["modes"]["bm25"]["ndcg@10"] > 0.6
    assert out["modes"]["bm25"]["recall@10"] > 0.75
    assert out["gate"]["labelled"] == 0 and out["gate"]["buckets"] == {}
    r = cli(db, "eval", "--kb", "sf", str(SLICE / "queries.jsonl"), "--qrels", str(SLICE / "qrels.tsv"),
            "--mode", "bm25", "-q")
    lines = r.output.splitlines()
    assert lines[0].startswith("sf: 40 queries, 40 with relevant documents")
    assert lines[1].split() == ["mode", "recall@1", "recall@5", "recall@10", "hit@5", "mrr@10", "ndcg@10"]
    assert lines[2].split()[0] == "bm25" and float(lines[2].split()[-1]) == round(
        out["modes"]["bm25"]["ndcg@10"], 3)


def test_eval_on_the_citewise_query_set_reports_refusal_per_bucket(tmp_path: Path) -> None:
    db = tmp_path / "kb.db"
    cli(db, "ingest", "--kb", "s", "--embedder", "hashing:256", "-q", str(SAMPLE))
    r = cli(db, "eval", "--kb", "s", str(SAMPLE_QUERIES / "smoking-cessation.test.jsonl"), "--json",
            "--mode", "bm25", "--mode", "hybrid")
    out = json.loads(r.output)
    text = (SAMPLE_QUERIES / "smoking-cessation.test.jsonl").read_text()
    lines = [json.loads(x) for x in text.splitlines()]
    counts = {b: sum(x["bucket"] == b for x in lines) for b in ("covered", "thin", "out_of_scope")}
    assert out["queries"] == len(lines) and out["judged"] == counts["covered"]
    assert list(out["modes"]) == ["bm25", "hybrid"]
    gate = out["gate"]
    assert {b: v["n"] for b, v in gate["buckets"].items()} == counts
    assert gate["labelled"] == len(lines)
    refused = sum(v["refused"] for v in gate["buckets"].values())
    assert gate["answered"] == len(lines) - refused
    assert gate["answered_share"] == round(gate["answered"] / len(lines), 4)
    from citewise.calibrate.calibration import clopper_pearson

    for b in gate["buckets"].values():  # each bucket's refusal rate carries its exact interval
        low, high = clopper_pearson(b["refused"], b["n"])
        assert (b["low"], b["high"]) == (round(low, 4), round(high, 4)) and low <= b["refusal_rate"] <= high
    # the hashing embedder has no measured threshold: the gate warns and uses 0.5
    assert gate["threshold"] == 0.5 and gate["warnings"]


def test_eval_gate_decisions_are_the_ones_ask_makes(tmp_path: Path) -> None:
    """A policy that reads the question (coverage) must see it in eval as in ask."""
    from dataclasses import replace

    from citewise.calibrate.evaluation import evaluate
    from citewise.calibrate.querysets import load_queries
    from citewise.engine import Engine
    from citewise.kb import GateSetting
    from citewise.records import Answer
    from citewise.stores.sqlite import open_sqlite

    engine = Engine(open_sqlite(tmp_path / "kb.db"))
    kb = engine.open_kb("s", embedder="hashing:256")
    engine.ingest(kb, [SAMPLE])
    setting = GateSetting("combined:0.25", 0.45, kb.config.embedder, kb.config.fingerprint(), "calibrated")
    kb = engine.store.update_kb("s", replace(kb.config, gate=setting))
    queries = load_queries(SAMPLE_QUERIES / "smoking-cessation.test.jsonl")
    report = evaluate(engine, kb, queries, modes=("hybrid",))
    by_eval = [r.answered for r in report.results]
    by_ask = [isinstance(engine.ask(kb, q.query), Answer) or engine.ask(kb, q.query).path != "gate"
              for q in queries]
    assert by_eval == by_ask and 0 < sum(by_eval) < len(by_eval)
