"""Calibrate the refusal gate from labelled questions, and say how sure the numbers are.

    observations = collect(engine, kb, queries, answers=True)   # signals, and ask end to end
    result = calibrate(observations, "auto", max_covered_refusal=0.05)
    store.update_kb(kb.name, replace(kb.config, gate=setting_for(kb.config, result)))

**What is counted.** ``collect`` reads each question's gate signals and, with ``answers``, asks
it through ``Engine.ask`` with the gate open (the generator and the citation check run, the
query log is left alone), keeping where it ended. The threshold is then chosen on what ``ask``
returns (*end to end*): a covered question the citation check refuses counts against the
budget at every threshold. Without answers (``--gate-only``) the gate alone is counted.

**One policy** (``thresholds.py``): the threshold refusing the most questions while refusing at
most the allowed number of covered ones, midway between observed values. **The rule** for that
number: the point estimate ``floor(max_covered_refusal * covered)``, or with ``guarantee`` (a
confidence) the count whose exact one-sided upper bound on covered refusal stays within the
budget (``intervals.py``: Learn-then-Test fixed-sequence testing). When the labelled covered
questions are too few for the guarantee, ``TooFewLabelsError`` says how many would do.

**auto** compares the policies in ``AUTO_POLICIES`` under the same stratified
cross-validation (``crossval.py``, up to 5 folds): each is fitted (threshold, and model for
``learned``) on all folds but one and judged on the one left out. It keeps the policy with the
best out-of-fold balance: the mean refusal rate of the buckets that should be refused (each
bucket weighs the same) minus the covered refusal rate; ties go to the larger ROC AUC between
covered questions and the rest, then to the order of ``AUTO_POLICIES``. When the labels allow
fewer than two folds, policies are compared on the labelled questions themselves and
``learned``, which cannot show that it wins out of fold, is not chosen.

**The intervals** are exact Clopper-Pearson intervals (``intervals.py``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

import numpy as np

from citewise.answer import gate
from citewise.answer.learned import LearnedModel
from citewise.answer.questions import check_question
from citewise.calibrate import crossval
from citewise.calibrate.end_to_end import run as run_end_to_end
from citewise.calibrate.intervals import CONFIDENCE, clopper_pearson, covered_needed, upper_bound
from citewise.calibrate.querysets import LabelledQuery
from citewise.calibrate.rates import Rate, bucket_of, refusal_rates
from citewise.calibrate.thresholds import (
    Observation,
    after_mask,
    auc,
    choose_threshold,
    covered_mask,
    fit,
    out_of_fold,
    spec_of,
    usable_folds,
    values,
)
from citewise.embedders import embedder_of
from citewise.engine import Engine
from citewise.errors import QueryError, TooFewLabelsError
from citewise.kb import GateSetting, KBConfig, KnowledgeBase

__all__ = ["AUTO_POLICIES", "CONFIDENCE", "Calibration", "Observation", "PolicyResult", "Rate",
           "auc", "bucket_of", "calibrate", "calibrate_policy", "choose_threshold",
           "clopper_pearson", "collect", "rate_table", "rates_at", "refusal_rates",
           "related_floor", "setting_for", "signal_aucs", "values"]

AUTO_POLICIES = ("top1", "mean", "pool", "coverage", "combined:0.25", "combined:0.5", "combined:1",
                 "margin", "sentence_terms", "sentence_cosine", "kb_terms", "grounded:0.25",
                 "grounded:0.5", "grounded:1", "answerable", "read:0.25", "read:0.5", "read:1", "learned")
RELATED_FLOOR_QUANTILE = 0.95


@dataclass(frozen=True)
class PolicyResult:
    """One policy calibrated: its threshold and what it does, on the labelled questions and
    out of fold."""

    policy: str
    threshold: float
    rates: tuple[Rate, ...]  # the gate alone
    score: float  # mean refusal rate of the refuse buckets, end to end when asked
    auc: float  # P(covered value > other value), ties counted half
    end_to_end: tuple[Rate, ...] | None = None  # what ``ask`` returns at the threshold
    out_of_fold: tuple[Rate, ...] | None = None  # end to end when asked, else the gate
    balance: float | None = None  # out of fold: refuse-bucket mean minus covered refusal
    model: LearnedModel | None = None
    allowed: int = 0  # covered refusals the rule allowed
    upper: float | None = None  # with a guarantee: the bound on covered refusal at the threshold

    @property
    def counted(self) -> tuple[Rate, ...]:
        """The rates the threshold was chosen on: end to end when asked, else the gate's."""
        return self.end_to_end if self.end_to_end is not None else self.rates

    @property
    def over_budget(self) -> bool:
        """More covered questions refused than allowed, whatever the threshold (the citation
        check refused them)."""
        covered = next((r for r in self.counted if r.bucket == "covered"), None)
        return covered is not None and covered.refused > max(self.allowed, 0)


@dataclass(frozen=True)
class SignalAUC:
    """How well one signal tells covered questions from thin and from out-of-scope ones."""

    signal: str
    thin: float
    out_of_scope: float


@dataclass(frozen=True)
class Calibration:
    chosen: PolicyResult
    compared: tuple[PolicyResult, ...]
    max_covered_refusal: float
    n: int
    related_floor: float | None
    end_to_end: bool = False  # the thresholds were chosen on what ``ask`` returns
    guarantee: float | None = None  # the confidence of the covered-refusal bound, if asked
    folds: int = 0  # cross-validation folds (0: compared on the labelled questions)
    signals: tuple[SignalAUC, ...] = ()


# -- signals -----------------------------------------------------------------------------------


def open_gate(kb: KnowledgeBase) -> KnowledgeBase:
    """The knowledge base with a gate that lets every question with a context through."""
    config = kb.config
    return replace(kb, config=replace(config, gate=GateSetting(
        "top1", -1.0, config.embedder, config.fingerprint(), "calibrated")))


def collect(engine: Engine, kb: KnowledgeBase, queries: Sequence[LabelledQuery],
            progress: Callable[[int], None] | None = None, batch: int = 64,
            answers: bool = False) -> list[Observation]:
    """Run every labelled question through retrieval and keep its signals; with ``answers``,
    ask each one end to end with the gate open too (``progress`` then hears each twice).

    Questions are embedded in batches (one model call per ``batch``), then retrieved and read
    one by one by ``Engine.decide``, as ``ask`` does with the knowledge base's own settings.
    """
    unlabelled = [q.id for q in queries if q.expect not in ("answer", "refuse")]
    if unlabelled:
        raise QueryError(
            f"Calibration needs every question labelled \"expect\": \"answer\" or \"refuse\"; "
            f"{len(unlabelled)} are not (first: {unlabelled[0]}). A BEIR query set has no refusals."
        )
    model = embedder_of(kb)
    the_gate = gate.gate_for(kb.config)[0]
    out = []
    for start in range(0, len(queries), batch):
        part = queries[start : start + batch]
        texts = [check_question(q.query) for q in part]
        for q, text, vector in zip(part, texts, model.embed(texts), strict=True):
            s = engine.decide(kb, text, vector, the_gate=the_gate, answerable=True).signals
            out.append(Observation(q.id, bucket_of(q), str(q.expect), s))
            if progress:
                progress(1)
    if not any(o.expect == "answer" for o in out):
        raise QueryError("Calibration needs covered questions (expect \"answer\") to bound their refusals")
    if answers:
        asked = run_end_to_end(engine, open_gate(kb), queries, progress=progress)
        out = [replace(o, after_gate=a.path, cited=a.cited, sources=a.sources)
               for o, a in zip(out, asked, strict=True)]
    return out


def rates_at(observations: Sequence[Observation], policy: str, threshold: float,
             confidence: float = CONFIDENCE, model: LearnedModel | None = None,
             end_to_end: bool = False) -> tuple[Rate, ...]:
    """What the gate ``policy >= threshold`` does to each bucket, decided by the gate itself;
    with ``end_to_end``, what ``ask`` returns (the observations must have been asked)."""
    the_gate = gate.ThresholdGate(policy, threshold, model=model)
    refused = [not the_gate.decide(o.signals).answer for o in observations]
    if end_to_end:
        refused = [r or o.refused_after_gate for r, o in zip(refused, observations, strict=True)]
    return refusal_rates(((o.bucket, r) for o, r in zip(observations, refused, strict=True)),
                         confidence)


def signal_aucs(observations: Sequence[Observation]) -> tuple[SignalAUC, ...]:
    """Each signal's ROC AUC, covered against thin and against out-of-scope questions."""
    out = []
    for name, *_ in gate.SIGNALS:
        v = values(observations, name)
        pair = []
        for other in ("thin", "out_of_scope"):
            keep = np.array([o.bucket in ("covered", other) for o in observations], dtype=bool)
            mine = [o for o, k in zip(observations, keep, strict=True) if k]
            pair.append(auc(v[keep], covered_mask(mine)) if mine else float("nan"))
        out.append(SignalAUC(name, *pair))
    return tuple(out)


# -- choosing ----------------------------------------------------------------------------------


def _refuse_mean(rates: Sequence[Rate], refuse_buckets: set[str]) -> float:
    wanted = [r.rate for r in rates if r.bucket in refuse_buckets]
    return float(np.mean(wanted)) if wanted else 0.0


def calibrate_policy(observations: Sequence[Observation], policy: str, max_covered_refusal: float,
                     confidence: float = CONFIDENCE, guarantee: float | None = None,
                     folds: int = crossval.FOLDS) -> PolicyResult:
    """Fit one policy on the labelled questions, report it there and (folds allowing) out of
    fold. End to end when every observation was asked."""
    spec = spec_of(policy)
    asked = bool(observations) and all(o.after_gate is not None for o in observations)
    fitted = fit(observations, spec, max_covered_refusal, guarantee, asked, folds)
    covered = covered_mask(observations)
    rates = rates_at(observations, spec, fitted.threshold, confidence, fitted.model)
    e2e = rates_at(observations, spec, fitted.threshold, confidence, fitted.model, True) if asked else None
    refuse_buckets = {o.bucket for o in observations if o.expect == "refuse"}
    counted = e2e if e2e is not None else rates
    upper = None
    if guarantee is not None:
        refused_covered = next(r.refused for r in counted if r.bucket == "covered")
        upper = upper_bound(refused_covered, int(covered.sum()), guarantee)
    oof, balance = None, None
    k = usable_folds(observations, folds)
    if k >= 2:
        refused = out_of_fold(observations, spec, max_covered_refusal, guarantee, asked, k)
        oof = refusal_rates(((o.bucket, bool(r)) for o, r in zip(observations, refused, strict=True)),
                            confidence)
        cov = next((r.rate for r in oof if r.bucket == "covered"), 0.0)
        balance = _refuse_mean(oof, refuse_buckets) - cov
    return PolicyResult(spec, fitted.threshold, rates, _refuse_mean(counted, refuse_buckets),
                        auc(fitted.values, covered), e2e, oof, balance, fitted.model,
                        fitted.allowed, upper)


def related_floor(observations: Sequence[Observation]) -> float | None:
    """The top-1 cosine out-of-scope questions reach (95th percentile): below it, unrelated."""
    top = sorted(o.signals.top1 for o in observations if o.bucket == "out_of_scope")
    if not top:
        return None
    return float(top[max(0, math.ceil(RELATED_FLOOR_QUANTILE * len(top)) - 1)])


def _check_guarantee(observations: Sequence[Observation], budget: float, guarantee: float) -> None:
    """``TooFewLabelsError`` when no threshold can certify the budget with these questions."""
    covered = covered_mask(observations)
    n = int(covered.sum())
    needed = covered_needed(budget, guarantee)
    if budget <= 0.0:
        raise TooFewLabelsError("No number of labelled questions can certify a covered refusal of "
                                "0; give --max-covered-refusal above 0.", needed)
    if n < needed:
        raise TooFewLabelsError(
            f"{n} labelled covered questions cannot bound covered refusal within {budget:.1%} at "
            f"{guarantee:.0%} confidence: even with none refused the exact upper bound is "
            f"{upper_bound(0, n, guarantee):.1%}. It needs at least {needed} covered questions "
            f"(expect \"answer\"), none of them refused; more if some are. Add labelled covered "
            "questions, or drop --confidence to use the point estimate.", needed)
    anyway = int((covered & (after_mask(observations) | np.array(
        [o.signals.n_context == 0 for o in observations], dtype=bool))).sum())
    if upper_bound(anyway, n, guarantee) > budget:
        raise QueryError(
            f"{anyway} of {n} covered questions are refused whatever the gate does (nothing "
            f"retrieved, or the citation check refused the answer): the exact upper bound on "
            f"covered refusal is {upper_bound(anyway, n, guarantee):.1%} at {guarantee:.0%} "
            f"confidence, over the {budget:.1%} budget at every threshold. Raise "
            "--max-covered-refusal, or certify the gate alone with --gate-only.")


def calibrate(observations: Sequence[Observation], policy: str = "auto",
              max_covered_refusal: float = 0.05, confidence: float = CONFIDENCE,
              guarantee: float | None = None, folds: int = crossval.FOLDS) -> Calibration:
    """Calibrate one policy, or with ``auto`` every policy in ``AUTO_POLICIES``, and choose
    (module docstring). ``confidence`` is the intervals'; ``guarantee`` the confidence of the
    covered-refusal bound (None: the point estimate)."""
    if not 0.0 <= max_covered_refusal < 1.0:
        raise QueryError(f"--max-covered-refusal lies in [0, 1), not {max_covered_refusal}")
    if guarantee is not None and not 0.0 < guarantee < 1.0:
        raise QueryError(f"--confidence lies in (0, 1), not {guarantee}")
    if guarantee is not None:
        _check_guarantee(observations, max_covered_refusal, guarantee)
    read = any(o.signals.answerable for o in observations)
    if policy != "auto" and gate.reads(policy) and observations and not read:
        raise QueryError(f"the {policy} policy needs the reader, which this knowledge base does not "
                         "use: `citewise kb set NAME reader=auto` first, or choose another policy")
    # without a reader, the policies that read are left out
    policies = tuple(p for p in AUTO_POLICIES if read or not gate.reads(p)) if policy == "auto" else (policy,)
    compared = [calibrate_policy(observations, p, max_covered_refusal, confidence, guarantee, folds)
                for p in policies]
    k = usable_folds(observations, folds)
    eligible = [i for i, p in enumerate(compared)
                if k >= 2 or p.policy != "learned" or len(compared) == 1]
    if k >= 2:
        order = sorted(eligible, key=lambda i: (-(compared[i].balance or 0.0),
                                                -np.nan_to_num(compared[i].auc), i))
    else:
        order = sorted(eligible, key=lambda i: (-compared[i].score, -np.nan_to_num(compared[i].auc), i))
    asked = bool(observations) and all(o.after_gate is not None for o in observations)
    return Calibration(compared[order[0]], tuple(compared), max_covered_refusal, len(observations),
                       related_floor(observations), asked, guarantee, k if k >= 2 else 0,
                       signal_aucs(observations))


def setting_for(config: KBConfig, result: Calibration, source: str = "") -> GateSetting:
    """The gate setting to store on a knowledge base: tied to its embedder and retrieval."""
    chosen = result.chosen
    details: dict[str, Any] = {
        "calibrated_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "queries": result.n,
        "file": source,
        "max_covered_refusal": result.max_covered_refusal,
        "rule": "guarantee" if result.guarantee is not None else "point",
        "counted": "end_to_end" if result.end_to_end else "gate",
        "buckets": [r.as_dict() for r in chosen.rates],
        "compared": {p.policy: round(p.threshold, 4) for p in result.compared},
    }
    if result.guarantee is not None:
        details["confidence"] = result.guarantee
    if chosen.end_to_end is not None:
        details["end_to_end"] = [r.as_dict() for r in chosen.end_to_end]
    if chosen.model is not None:
        details["model"] = chosen.model.as_dict()
    if result.related_floor is not None:
        details["related_floor"] = round(result.related_floor, 4)
    return GateSetting(chosen.policy, chosen.threshold, config.embedder,
                       config.fingerprint(), "calibrated", details)


def rate_table(rows: Sequence[tuple[str, str, float, Sequence[Rate]]]) -> str:
    """A plain-text table of ``(label, policy, threshold, rates)`` rows, one line per bucket."""
    lines = [f"{'gate':<20} {'policy':<15} {'threshold':>9}  {'bucket':<13} {'n':>5} {'refused':>7} "
             f"{'rate':>7}  95% interval (exact)"]
    for label, policy, threshold, rates in rows:
        head = f"{label:<20} {policy:<15} {threshold:>9.4f}"
        for r in rates:
            lines.append(f"{head}  {r.bucket:<13} {r.n:>5} {r.refused:>7} {r.rate * 100:>6.1f}%  "
                         f"[{r.low * 100:5.1f}%, {r.high * 100:5.1f}%]")
            head = " " * len(head)
    return "\n".join(lines)

