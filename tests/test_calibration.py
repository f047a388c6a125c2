"""Calibration arithmetic against hand-computed cases, the policy choice, and the stored gate."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest
from scipy.stats import beta

from citewise.answer import gate, signals
from citewise.calibrate import calibration
from citewise.calibrate.calibration import Observation
from citewise.calibrate.intervals import clopper_pearson
from citewise.calibrate.querysets import LabelledQuery
from citewise.calibrate.rates import refusal_rates
from citewise.errors import ConfigError, QueryError, UnknownNameError
from citewise.kb import Retrieval
from citewise.records import Candidate, Chunk, Signals
from tests.helpers import hashing_config

# -- Clopper-Pearson --------------------------------------------------------------------------


@pytest.mark.parametrize("n", [1, 5, 20, 120])
def test_interval_when_nothing_or_everything_is_refused(n: int) -> None:
    # k = 0: P(X = 0 | p) = (1 - p)^n = 0.025 gives the upper bound; k = n mirrors it
    assert clopper_pearson(0, n) == (0.0, pytest.approx(1 - 0.025 ** (1 / n), abs=1e-12))
    assert clopper_pearson(n, n) == (pytest.approx(0.025 ** (1 / n), abs=1e-12), 1.0)


@pytest.mark.parametrize(("k", "n"), [(3, 20), (1, 40), (19, 20), (48, 100), (2, 500)])
def test_interval_in_the_middle_matches_the_beta_quantiles(k: int, n: int) -> None:
    # the exact interval is (Beta(a/2; k, n-k+1), Beta(1-a/2; k+1, n-k)); computed here by scipy,
    # in citewise by bisection on the binomial distribution function
    low, high = clopper_pearson(k, n)
    assert low == pytest.approx(beta.ppf(0.025, k, n - k + 1), abs=1e-10)
    assert high == pytest.approx(beta.ppf(0.975, k + 1, n - k), abs=1e-10)


def test_interval_edges() -> None:
    assert clopper_pearson(0, 0) == (0.0, 1.0)
    low, high = clopper_pearson(3, 20, confidence=0.9)
    assert low == pytest.approx(beta.ppf(0.05, 3, 18), abs=1e-10)
    with pytest.raises(ValueError):
        clopper_pearson(5, 4)


def test_refusal_rates_per_bucket_in_a_fixed_order() -> None:
    rates = refusal_rates([("thin", True), ("covered", False), ("other", True), ("covered", True),
                           ("out_of_scope", True), ("thin", False)])
    assert [(r.bucket, r.n, r.refused) for r in rates] == [
        ("covered", 2, 1), ("thin", 2, 1), ("out_of_scope", 1, 1), ("other", 1, 1)]
    assert rates[0].rate == 0.5 and (rates[0].low, rates[0].high) == clopper_pearson(1, 2)


# -- the sweep --------------------------------------------------------------------------------


def obs(bucket: str, top1: float, coverage: float = 0.0, mean: float = 0.0, n: int = 8) -> Observation:
    expect = "answer" if bucket == "covered" else "refuse"
    return Observation(f"{bucket}-{top1}-{coverage}", bucket, expect, Signals(top1, mean, n, coverage))


COVERED = [round(0.50 + i / 100, 2) for i in range(20)]  # 0.50 .. 0.69


def test_threshold_is_midway_below_the_lowest_covered_value_kept() -> None:
    observations = [obs("covered", v) for v in COVERED] + [
        obs("out_of_scope", 0.1), obs("out_of_scope", 0.3), obs("thin", 0.505)]
    # 5% of 20 covered may be refused: 0.50 goes, 0.51 must stay; the next value below is 0.505
    chosen = calibration.calibrate_policy(observations, "top1", 0.05)
    assert chosen.threshold == pytest.approx((0.505 + 0.51) / 2)
    assert [(r.bucket, r.refused) for r in chosen.rates] == [
        ("covered", 1), ("thin", 1), ("out_of_scope", 2)]
    # none may be refused: 0.50 stays; the next value below is 0.3, so the thin question passes
    strict = calibration.calibrate_policy(observations, "top1", 0.0)
    assert strict.threshold == pytest.approx((0.3 + 0.5) / 2)
    assert [r.refused for r in strict.rates] == [0, 0, 2]


def test_questions_with_nothing_retrieved_are_always_refused_and_count() -> None:
    observations = [obs("covered", v) for v in COVERED[:19]] + [obs("covered", 0.9, n=0),
                                                                obs("thin", 0.505)]
    chosen = calibration.calibrate_policy(observations, "top1", 0.05)
    # the empty covered question already uses the one allowed refusal: 0.50 must stay, and
    # nothing retrieved lies below it, so the threshold is 0.50 itself and the thin one passes
    assert chosen.threshold == 0.5
    assert [r.refused for r in chosen.rates] == [1, 0]


def test_auto_picks_the_policy_that_separates_the_buckets() -> None:
    # thin questions look as close as covered ones by cosine, but miss the question's words
    observations = (
        [obs("covered", 0.8, coverage=0.9, mean=0.5) for _ in range(10)]
        + [obs("thin", 0.8, coverage=0.2, mean=0.5) for _ in range(10)]
        + [obs("out_of_scope", 0.1, coverage=0.0, mean=0.1) for _ in range(10)]
    )
    result = calibration.calibrate(observations, "auto", 0.05)
    scores = {p.policy: p.score for p in result.compared}
    assert scores["top1"] == pytest.approx(0.5) and scores["coverage"] == pytest.approx(1.0)
    # coverage and every combined policy tie at 100% and AUC 1: the simplest comes first
    assert result.chosen.policy == "coverage"
    only_top1 = calibration.calibrate(observations, "top1", 0.05)
    assert [p.policy for p in only_top1.compared] == ["top1"]
    assert [r.refused for r in only_top1.chosen.rates] == [0, 0, 10]


def test_auc_ties_count_half() -> None:
    v = np.array([0.5, 0.3, 0.5, 0.1])  # covered 0.5, 0.3 against others 0.5, 0.1
    assert calibration.auc(v, np.array([True, True, False, False])) == pytest.approx((0.5 + 1 + 0 + 1) / 4)


def test_related_floor_is_the_95th_percentile_of_out_of_scope_top1() -> None:
    observations = [obs("out_of_scope", i / 100) for i in range(1, 21)] + [obs("covered", 0.9)]
    assert calibration.related_floor(observations) == pytest.approx(0.19)
    assert calibration.related_floor([obs("covered", 0.9)]) is None


def test_unlabelled_questions_are_rejected() -> None:
    beir = [LabelledQuery("1", "a claim", {"d": 1})]
    with pytest.raises(QueryError, match="expect"):
        calibration.collect(None, None, beir)  # type: ignore[arg-type]
    with pytest.raises(QueryError, match="max-covered-refusal"):
        calibration.calibrate([obs("covered", 0.5)], "top1", 1.5)


# -- signals and policies ---------------------------------------------------------------------


def chunk(text: str) -> Candidate:
    return Candidate(Chunk("d.md", 0, ("Notes",), text, "Guide"), 0.5)


def test_coverage_weights_words_by_their_idf_in_the_candidate_pool() -> None:
    pool = [chunk("Varenicline dose is 1 mg twice daily."), chunk("Nausea is common with varenicline."),
            chunk("Varenicline works."), chunk("Bupropion dose.")]

    def idf(df: int) -> float:
        return math.log(1 + (4 - df + 0.5) / (df + 0.5))

    # varenicline is in 3 of 4 candidates, dose in 2, nausea in 1; the context has the first two
    expected = (idf(3) + idf(2)) / (idf(3) + idf(2) + idf(1))
    assert signals.coverage("Varenicline dose for nausea?", pool[:1], pool) == pytest.approx(expected)
    assert signals.coverage("Varenicline dose for nausea?", pool[:2], pool) == pytest.approx(1.0)
    assert signals.coverage("the of and", pool[:1], pool) == 0.0
    s = signals.measure(pool[:1], pool, "Varenicline dose for nausea?")
    assert s.coverage == pytest.approx(expected) and s.top1 == 0.5


def test_pool_is_the_mean_cosine_of_the_dense_top_k() -> None:
    def cand(cos: float, dense_rank: int) -> Candidate:
        return Candidate(Chunk("d.md", 0, (), "text"), cos, dense_rank=dense_rank)

    candidates = [cand(0.9, 1), cand(0.5, 2), cand(0.1, 0)]  # the last came from BM25 only
    assert signals.measure(candidates[:1], candidates, "q").pool == pytest.approx(0.7)
    assert gate.get_policy("pool").value(Signals(0.9, 0.5, 2, pool=0.7)) == 0.7


def test_policy_specs() -> None:
    s = Signals(top1=0.6, mean=0.4, n_context=3, coverage=0.5)
    assert [gate.get_policy(p).value(s) for p in ("top1", "mean", "coverage")] == [0.6, 0.4, 0.5]
    assert gate.get_policy("combined").spec == "combined:0.5"
    assert gate.get_policy("combined:0.25").value(s) == pytest.approx(0.725)
    with pytest.raises(UnknownNameError, match="agreement, answerable, combined, coverage, "
                       "grounded, kb_terms, learned, margin, mean, pool, read, sentence_cosine, "
                       "sentence_terms, top1"):
        gate.get_policy("median")
    with pytest.raises(UnknownNameError):
        gate.get_policy("top1:3")
    with pytest.raises(ConfigError, match="weight"):
        gate.get_policy("combined:x")
    with pytest.raises(ConfigError, match=r"lies in \[0, 1\]"):
        gate.ThresholdGate("coverage", 1.5)
    assert gate.ThresholdGate("combined:1", 1.5).decide(Signals(0.9, 0.5, 8, 0.7)).answer


# -- the stored setting -----------------------------------------------------------------------


def test_setting_is_stored_and_invalidated_when_the_embedder_or_retrieval_changes(store) -> None:
    config = hashing_config()
    kb = store.create_kb("s", config)
    observations = [obs("covered", v, coverage=0.8) for v in COVERED] + [obs("thin", 0.4)]
    result = calibration.calibrate(observations, "combined:0.25", 0.05)
    kb = store.update_kb("s", replace(config, gate=calibration.setting_for(config, result, "q.jsonl")))
    setting = store.get_kb("s").config.gate
    assert (setting.policy, setting.source) == ("combined:0.25", "calibrated")
    assert setting.embedder == "hashing:256"
    assert setting.threshold == result.chosen.threshold and setting.details["file"] == "q.jsonl"
    assert setting.details["buckets"][0] == {"bucket": "covered", "n": 20, "refused": 1, "rate": 0.05,
                                             "low": 0.0013, "high": 0.2487}
    used, warnings = gate.gate_for(kb.config)
    assert (used.policy, used.threshold, warnings) == ("combined:0.25", result.chosen.threshold, [])

    # the same setting under another embedder (e.g. after a replay), other retrieval settings,
    # or headings no longer embedded: the threshold no longer holds
    for changed in (replace(kb.config, embedder="hashing:128", dim=128),
                    replace(kb.config, retrieval=Retrieval(dense_k=20)),
                    replace(kb.config, embed_headings=False)):
        used, warnings = gate.gate_for(changed)
        assert used.policy == "top1" and used.threshold == 0.5
        assert "uncalibrated until `citewise calibrate` runs again" in warnings[0]
        assert f"calibrated for {kb.config.embedder}" in warnings[0]


def test_default_for_the_local_model_is_measured_and_has_a_related_floor() -> None:
    config = replace(hashing_config(), embedder="local:all-MiniLM-L6-v2", dim=384)
    used, warnings = gate.gate_for(config)
    policy = gate.DEFAULT_POLICY[config.embedder]
    assert warnings == [] and used.policy == policy
    assert used.threshold == gate.DEFAULT_THRESHOLDS[(config.embedder, policy)]
    assert used.related_floor == gate.DEFAULT_RELATED_FLOOR[config.embedder]


# -- the command, end to end on the sample collection -----------------------------------------


@pytest.mark.heavy
def test_calibrate_command_end_to_end(tmp_path) -> None:
    import json

    from typer.testing import CliRunner

    from citewise.calibrate.querysets import load_queries
    from citewise.cli import app
    from citewise.engine import Engine
    from citewise.stores.sqlite import open_sqlite
    from tests.helpers import SAMPLE, SAMPLE_QUERIES

    runner = CliRunner()
    db, png = tmp_path / "kb.db", tmp_path / "plot" / "gate.png"
    train = SAMPLE_QUERIES / "smoking-cessation.train.jsonl"

    def cli(*args: str):
        return runner.invoke(app, ["--db", str(db), *args], catch_exceptions=False)

    assert cli("ingest", "--kb", "s", "--embedder", "hashing:256", "-q", str(SAMPLE)).exit_code == 0
    before = cli("ask", "--kb", "s", "varenicline dose schedule days")
    assert "No measured threshold exists for hashing:256" in before.stderr

    r = cli("calibrate", "--kb", "s", str(train), "--plot", str(png), "--json")
    assert r.exit_code == 0, r.output
    data = json.loads(r.stdout)
    assert {"kb", "file", "queries", "policy", "threshold", "max_covered_refusal", "confidence",
            "rule", "guarantee", "counted", "folds", "buckets", "compared", "signals", "model",
            "related_floor", "embedder", "fingerprint", "stored", "plot", "end_to_end"} == set(data)
    assert (data["rule"], data["guarantee"], data["counted"], data["folds"]) == (
        "point", None, "end_to_end", 5)
    labelled = load_queries(train)
    n_covered = sum(q.bucket == "covered" for q in labelled)
    assert data["queries"] == len(labelled) and data["stored"] and data["embedder"] == "hashing:256"
    assert [b["bucket"] for b in data["buckets"]] == ["covered", "thin", "out_of_scope"]
    covered = data["buckets"][0]
    assert covered["n"] == n_covered and covered["refused"] <= 0.05 * n_covered
    interval = clopper_pearson(covered["refused"], n_covered)
    assert (covered["low"], covered["high"]) == tuple(round(x, 4) for x in interval)
    # a knowledge base without the reader (hashing:256) compares the policies that do not read
    assert [p["policy"] for p in data["compared"]] == [
        p for p in calibration.AUTO_POLICIES if not gate.reads(p)]
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

    shown = json.loads(cli("kb", "show", "s", "--json").stdout)
    assert shown["gate_in_use"] == {"policy": data["policy"], "threshold": data["threshold"], "warnings": []}

    # what calibrate reported is what the gate does to each question when asked
    engine = Engine(open_sqlite(db))
    kb = engine.store.get_kb("s")
    refused = {"covered": 0, "thin": 0, "out_of_scope": 0}
    asked = dict(refused)
    for q in labelled:
        result = engine.ask(kb, q.query)
        refused[q.bucket] += not result.decision.answer
        asked[q.bucket] += result.status == "refused"
    assert refused == {b["bucket"]: b["refused"] for b in data["buckets"]}
    # and end to end, what calibrate counted (asked once with the gate open) is what ask returns
    assert asked == {b: v["refused"] for b, v in data["end_to_end"]["buckets"].items()}
    chosen = next(p for p in data["compared"] if p["policy"] == data["policy"])
    assert [b["refused"] for b in chosen["end_to_end_buckets"]] == list(asked.values())
    assert len(chosen["out_of_fold"]) == 3 and chosen["balance"] is not None
    assert {s["signal"] for s in data["signals"]} >= {"sentence_terms", "sentence_cosine",
                                                      "margin", "agreement"}

    # changed retrieval settings: ask warns on stderr that the gate is uncalibrated
    engine.store.update_kb("s", replace(kb.config, retrieval=Retrieval(context_k=4)))
    after = cli("ask", "--kb", "s", "varenicline dose schedule days")
    assert "warning: The gate threshold was calibrated for hashing:256" in after.stderr
    assert "uncalibrated until `citewise calibrate` runs again" in after.stderr
    text = cli("calibrate", "--kb", "s", str(train), "--policy", "top1", "--no-save", "-q")
    assert "policy top1" in text.stdout and "not stored" in text.stdout
    assert "95% interval" in text.stdout and "covered" in text.stdout
    # fewer than 99 covered questions cannot certify 3% at 95% confidence: the command says how
    # many can
    assert n_covered < 99
    short = runner.invoke(app, ["--db", str(db), "calibrate", "--kb", "s", str(train), "--confidence",
                                "0.95", "--max-covered-refusal", "0.03", "--gate-only", "-q"])
    assert "It needs at least 99 covered questions" in str(short.exception)
    loose = cli("calibrate", "--kb", "s", str(train), "--confidence", "0.9",
                "--max-covered-refusal", "0.1", "--policy", "top1", "--gate-only", "--no-save", "--json")
    sure = json.loads(loose.stdout)
    assert sure["rule"] == "guarantee" and sure["counted"] == "gate"
    assert sure["guarantee"]["upper"] <= 0.1
    k = sure["guarantee"]["allowed"]  # the most refusals whose exact upper bound stays within 10%
    assert k >= 1 and beta.ppf(0.9, k + 1, n_covered - k) <= 0.1 < beta.ppf(0.9, k + 2, n_covered - k - 1)
    bad = runner.invoke(app, ["--db", str(db), "calibrate", "--kb", "s", str(train), "--policy", "median"])
    assert "auto, combined, coverage, grounded, kb_terms, learned, margin, mean, pool" in str(bad.exception)
