"""The risk-controlled threshold rule on synthetic scores where the answer is known, and the
end-to-end counting it rests on."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import beta, binom

from citewise.calibrate import calibration, intervals, thresholds
from citewise.calibrate.calibration import Observation
from citewise.errors import QueryError, TooFewLabelsError
from citewise.records import Signals

pytestmark = pytest.mark.unit


def obs(bucket: str, top1: float, after: str | None = None, i: int = 0) -> Observation:
    expect = "answer" if bucket == "covered" else "refuse"
    return Observation(f"{bucket}-{top1}-{i}", bucket, expect, Signals(top1, 0.0, 8), after)


@pytest.mark.parametrize(("k", "n"), [(0, 10), (1, 40), (3, 100), (17, 300), (9, 10)])
def test_upper_bound_is_the_one_sided_beta_quantile(k: int, n: int) -> None:
    assert intervals.upper_bound(k, n, 0.95) == pytest.approx(beta.ppf(0.95, k + 1, n - k), abs=1e-10)
    assert intervals.upper_bound(n, n) == 1.0


@pytest.mark.parametrize("n", [20, 58, 59, 100, 200, 1000])
@pytest.mark.parametrize("budget", [0.01, 0.05, 0.1])
def test_allowed_refusals_is_the_largest_count_whose_bound_is_within_budget(n: int, budget: float) -> None:
    k = intervals.allowed_refusals(n, budget, 0.95)
    # the binomial p-value of k refusals is within 1 - confidence, and of k + 1 it is not
    assert k == max((j for j in range(n + 1) if binom.cdf(j, n, budget) <= 0.05), default=-1)
    if k >= 0:
        assert intervals.upper_bound(k, n, 0.95) <= budget < intervals.upper_bound(k + 1, n, 0.95)
    assert intervals.allowed_refusals(n, budget) == int(np.floor(budget * n + 1e-9))  # point rule


def test_known_counts_and_how_many_questions_a_budget_needs() -> None:
    # (1 - 0.05)^59 = 0.0485 <= 0.05 < 0.0510 = 0.95^58: 59 covered questions, none refused
    assert intervals.covered_needed(0.05, 0.95) == 59
    assert intervals.allowed_refusals(59, 0.05, 0.95) == 0
    assert intervals.allowed_refusals(58, 0.05, 0.95) == -1
    # P(Bin(100, 0.05) <= 1) = 0.037, P(<= 2) = 0.118
    assert intervals.allowed_refusals(100, 0.05, 0.95) == 1
    assert intervals.covered_needed(0.1, 0.9) == 22  # 0.9^22 = 0.098, 0.9^21 = 0.109


def synthetic(n_covered: int, n_thin: int = 50) -> list[Observation]:
    """Covered questions at 0.01, 0.02, ... and thin ones below 0.5 interleaved with them."""
    covered = [obs("covered", (i + 1) / 100, i=i) for i in range(n_covered)]
    thin = [obs("thin", (i + 0.5) / 100, i=i) for i in range(n_thin)]
    return covered + thin


def test_the_guaranteed_threshold_on_synthetic_scores() -> None:
    observations = synthetic(100)
    # 100 covered at a 5% budget, 95% confidence: one covered question may be refused (0.01),
    # so the threshold may rise to the next covered value 0.02, placed midway down to the thin
    # 0.015 below it
    sure = calibration.calibrate(observations, "top1", 0.05, guarantee=0.95)
    assert sure.chosen.threshold == pytest.approx((0.015 + 0.02) / 2)
    assert sure.chosen.allowed == 1 and sure.chosen.rates[0].refused == 1
    assert sure.chosen.upper == pytest.approx(intervals.upper_bound(1, 100, 0.95))
    assert sure.chosen.upper <= 0.05
    # the point estimate lets 5 of them go (0.01 .. 0.05): up to 0.06, midway from 0.055
    point = calibration.calibrate(observations, "top1", 0.05)
    assert point.chosen.threshold == pytest.approx((0.055 + 0.06) / 2)
    assert point.chosen.rates[0].refused == 5 and point.chosen.upper is None


def test_too_few_covered_questions_say_how_many_the_budget_needs() -> None:
    with pytest.raises(TooFewLabelsError, match="at least 59 covered questions") as raised:
        calibration.calibrate(synthetic(58), "top1", 0.05, guarantee=0.95)
    assert raised.value.needed == 59
    assert calibration.calibrate(synthetic(59), "top1", 0.05, guarantee=0.95).chosen.allowed == 0
    with pytest.raises(TooFewLabelsError, match="above 0"):
        calibration.calibrate(synthetic(100), "top1", 0.0, guarantee=0.95)


def test_the_guarantee_holds_over_many_labelled_sets() -> None:
    # covered values uniform on (0, 1): a threshold t refuses a share t of covered questions.
    # The rule must keep t within the budget in at least 95% of labelled sets; the point
    # estimate does so in about half of them.
    rng = np.random.default_rng(7)
    over_sure = over_point = 0
    runs = 400
    for _ in range(runs):
        v = rng.random(200)
        covered = np.ones(200, dtype=bool)
        k = intervals.allowed_refusals(200, 0.05, 0.95)
        over_sure += thresholds.choose_threshold(v, covered, 0.05, allowed=k) > 0.05
        over_point += thresholds.choose_threshold(v, covered, 0.05) > 0.05
    assert over_sure / runs <= 0.05
    assert over_point / runs > 0.3


def test_end_to_end_a_covered_question_refused_by_the_check_spends_the_budget() -> None:
    covered = [obs("covered", (i + 1) / 100, "answered", i) for i in range(20)]
    thin = [obs("thin", 0.035, "answered"), obs("thin", 0.5, "citation_check")]
    # one of 20 may be refused: the check refuses the covered 0.9, so the gate may refuse none
    checked = [*covered[:-1], obs("covered", 0.9, "citation_check", 99), *thin]
    result = calibration.calibrate(checked, "top1", 0.05)
    assert result.end_to_end and result.chosen.threshold == pytest.approx(0.01)
    assert [r.refused for r in result.chosen.end_to_end] == [1, 1]  # covered 0.9, thin at the check
    assert [r.refused for r in result.chosen.rates] == [0, 0]
    # without it, the gate may refuse the lowest covered question, and the thin 0.035 is not
    # below the next one: the threshold sits midway between 0.01 and 0.02
    clean = calibration.calibrate([*covered, *thin], "top1", 0.05)
    assert clean.chosen.threshold == pytest.approx(0.015) and not clean.chosen.over_budget
    # two refused by the check: over the budget whatever the threshold; the gate adds none
    twice = [*covered[:-2], obs("covered", 0.9, "citation_check", 98),
             obs("covered", 0.8, "generation_failed", 97), *thin]
    over = calibration.calibrate(twice, "top1", 0.05)
    assert over.chosen.over_budget and over.chosen.end_to_end[0].refused == 2
    assert over.chosen.threshold == pytest.approx(0.01)


def test_the_guarantee_refuses_a_budget_the_check_alone_breaks() -> None:
    checked = [obs("covered", (i + 1) / 100, "answered", i) for i in range(97)]
    checked += [obs("covered", 0.9, "citation_check", 100 + i) for i in range(3)]
    with pytest.raises(QueryError, match="3 of 100 covered questions are refused whatever"):
        calibration.calibrate(checked + [obs("thin", 0.3, "answered")], "top1", 0.05, guarantee=0.95)
