"""``citewise kb set``: a knowledge base's generator, context size, fusion and gate policy change
after creation, checked as at creation, and the command says when the gate's calibration goes
stale. Tenants over HTTP get no new power from it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from citewise.cli import app
from citewise.errors import UnknownNameError
from tests.api_fixtures import COVERED, kb_with_sample, tenant
from tests.helpers import SAMPLE, SAMPLE_QUERIES

runner = CliRunner()
TRAIN = SAMPLE_QUERIES / "smoking-cessation.train.jsonl"


def cli(db: Path, *args: str) -> object:
    return runner.invoke(app, ["--db", str(db), *args], catch_exceptions=True)


def show(db: Path) -> dict:
    return json.loads(cli(db, "kb", "show", "s", "--json").stdout)


@pytest.fixture(name="db")
def db_fixture(tmp_path: Path) -> Path:
    db = tmp_path / "kb.db"
    assert cli(db, "ingest", "--kb", "s", "--embedder", "hashing:256", "-q", str(SAMPLE)).exit_code == 0
    return db


def test_generator_context_size_and_fusion_change(db: Path) -> None:
    r = cli(db, "kb", "set", "s", "generator=scripted:hi", "context_k=5", "fusion=rrf",
            "dense_weight=0.7", "mmr=off")
    assert r.exit_code == 0, r.output
    assert r.stdout.splitlines() == ["s: generator extractive -> scripted:hi", "s: context_k 8 -> 5",
                                     "s: fusion convex -> rrf", "s: dense_weight 0.5 -> 0.7",
                                     "s: mmr True -> False"]
    c = show(db)["config"]
    assert c["generator"] == "scripted:hi"
    assert {k: c["retrieval"][k] for k in ("context_k", "fusion", "dense_weight", "mmr")} == {
        "context_k": 5, "fusion": "rrf", "dense_weight": 0.7, "mmr": False}
    cli(db, "kb", "set", "s", "generator=extractive")
    answer = json.loads(cli(db, "ask", "--kb", "s", COVERED, "--json").stdout)
    assert answer["status"] == "answered" and len(answer["chunks"]) == 5  # the new context size
    again = cli(db, "kb", "set", "s", "context_k=5")
    assert again.stdout.startswith("s: nothing to change")


@pytest.mark.parametrize(("setting", "message"), [
    ("context_k=0", "retrieval setting context_k must be at least 1"),
    ("context_k=many", "context_k takes an integer, not 'many'"),
    ("fusion=max", "Unknown fusion 'max'. Valid fusion names: convex, rrf."),
    ("dense_weight=2", "retrieval setting dense_weight must be between 0 and 1"),
    ("generator=telepathy:v1", "Unknown generator 'telepathy'"),
    ("generator=openai-compatible:localhost", "openai-compatible:URL#MODEL"),
    ("gate_policy=combined:9", "the combined policy's coverage weight lies in (0, 4]"),
    ("embedder=hashing:64", "Unknown knowledge base setting 'embedder'. Valid knowledge base setting "
     "names: bm25_k, context_k, dense_k, dense_weight, fusion, gate_policy, generator"),
    ("context_k", "expected key=value, not 'context_k'"),
])
def test_a_bad_setting_changes_nothing(db: Path, setting: str, message: str) -> None:
    before = show(db)["config"]
    r = cli(db, "kb", "set", "s", "context_k=3", setting)
    assert r.exit_code == 2, r.output  # the caller's typing: a usage error, as the README says
    assert message in " ".join(r.output.split()) and "kb set --help'" in r.output
    assert show(db)["config"] == before


def test_a_missing_knowledge_base_or_setting(db: Path) -> None:
    before = show(db)["config"]
    missing = cli(db, "kb", "set", "nope", "context_k=3")
    assert missing.exit_code == 1 and "nope" in str(missing.exception), missing.output
    usage = cli(db, "kb", "set", "s")  # no KEY=VALUE: a usage error
    assert usage.exit_code == 2 and "KEY=VALUE" in usage.output.upper(), usage.output
    assert show(db)["config"] == before


@pytest.mark.heavy
def test_changing_retrieval_makes_the_calibration_stale_and_says_how_to_recalibrate(db: Path) -> None:
    assert cli(db, "calibrate", "--kb", "s", str(TRAIN), "-q").exit_code == 0
    calibrated = show(db)["gate_in_use"]
    assert not calibrated["warnings"]
    r = cli(db, "kb", "set", "s", "fusion=rrf", "--json")
    out = json.loads(r.stdout)
    assert out["changed"] == {"fusion": {"from": "convex", "to": "rrf"}}
    assert out["calibration"] == "stale" and out["gate_in_use"]["warnings"]
    assert "stale" in out["notes"][0] and "`citewise calibrate --kb s QUERIES.jsonl`" in out["notes"][0]
    asked = cli(db, "ask", "--kb", "s", "varenicline dose schedule days")
    assert "uncalibrated until `citewise calibrate` runs again" in asked.stderr
    # the generator is not part of what a threshold holds for
    assert json.loads(cli(db, "kb", "set", "s", "generator=scripted:x", "--json").stdout)[
        "calibration"] == "stale"
    back = cli(db, "kb", "set", "s", "fusion=convex")
    assert "holds again" in back.stdout and show(db)["gate_in_use"] == calibrated
    kept = json.loads(cli(db, "kb", "set", "s", "generator=extractive", "--json").stdout)
    assert kept["calibration"] == "calibrated" and kept["notes"] == []


@pytest.mark.heavy
def test_changing_the_gate_policy_replaces_a_calibrated_threshold(db: Path) -> None:
    assert cli(db, "calibrate", "--kb", "s", str(TRAIN), "-q", "--policy", "top1").exit_code == 0
    r = cli(db, "kb", "set", "s", "gate_policy=mean")
    assert r.exit_code == 0
    assert "s: gate_policy top1 -> mean" in r.stdout
    assert "belonged to the old policy" in r.stdout and "--policy mean QUERIES.jsonl" in r.stdout
    assert "No threshold was measured for hashing:256 with mean" in r.stdout
    gate = show(db)["gate_in_use"]
    assert gate["policy"] == "mean" and gate["threshold"] == 0.5
    assert gate["warnings"] == ["No measured threshold exists for hashing:256; the gate uses 0.5 "
                                "until `citewise calibrate` sets one from labelled questions."]
    # a later retrieval change keeps the chosen policy
    cli(db, "kb", "set", "s", "context_k=6")
    assert show(db)["gate_in_use"]["policy"] == "mean"


def test_tenants_gain_no_power_over_http(client: TestClient, api_settings: object) -> None:
    routes = {(m, r.path) for r in client.app.routes for m in getattr(r, "methods", ())}
    assert not {(m, p) for m, p in routes if p.startswith("/v1/kbs/{kb}") and m in ("PUT", "PATCH")}
    acme = tenant(client, "acme")
    kb_with_sample(client, acme)
    db = Path(api_settings.db)  # type: ignore[attr-defined]
    assert cli(db, "kb", "set", "docs", "generator=openai:gpt-4o-mini").exit_code != 0  # not the operator's
    assert cli(db, "--tenant", "acme", "kb", "set", "docs", "generator=openai:gpt-4o-mini").exit_code == 0
    r = client.post("/v1/kbs/docs/ask", json={"question": COVERED}, headers=acme.headers)
    assert r.status_code >= 400 and "not allowed on this server" in r.text


def test_unknown_name_errors_come_from_the_registries() -> None:
    from citewise import kb_settings

    with pytest.raises(UnknownNameError) as e:
        kb_settings.check_value("colour", "red")
    assert e.value.valid == sorted(kb_settings.KEYS)
