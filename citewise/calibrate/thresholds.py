"""One policy's threshold from labelled questions, and its refusals on others.

    fitted = fit(observations, "top1", budget=0.05)              # the threshold (and model)
    refused(other_observations, fitted, end_to_end=True)         # who it refuses

**Values.** Each question has one value under a policy (``gate.get_policy(p).value``); a
question with nothing retrieved gets ``-inf`` (always refused). For ``learned`` the model is
fitted on the questions given (``learned.fit``), and the threshold is chosen on *cross-fitted*
values: each question scored by the model fitted without its fold, so it is not chosen on
values the model was fitted to; the stored model is the one fitted on all of them.

**The sweep.** The gate refuses a question whose value is below the threshold. Only the
observed values matter: a threshold between two neighbouring values refuses the same questions
as any other between them. The chosen threshold refuses as many questions as possible while
refusing at most ``allowed`` covered ones (``expect == "answer"``): the highest observed value
``v`` that keeps that bound, with the threshold placed midway between ``v`` and the next value
below it, so neither side sits on the edge. ``allowed`` comes from
``intervals.allowed_refusals``: the point estimate ``floor(budget * n)``, or the guarantee's
count. **End to end**, a covered question the citation check refuses when the gate lets it
through is refused at every threshold and counts against ``allowed`` whatever the threshold;
when such questions alone exceed ``allowed``, the threshold refuses no covered question beyond
them (the budget cannot be kept, and ``PolicyResult.over_budget`` says so).

**Out of fold.** ``out_of_fold`` fits the policy on all folds but one and applies it to the one
left out, for each fold in turn (``crossval.py``), so every question is judged by a threshold
(and model) chosen without it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from citewise.answer import gate, learned
from citewise.calibrate import crossval
from citewise.calibrate.intervals import allowed_refusals
from citewise.records import Signals


@dataclass(frozen=True)
class Observation:
    """One labelled question's gate signals and, when asked end to end with the gate open,
    where ``ask`` ended (``after_gate``: ``answered``, ``citation_check``,
    ``generation_failed``; ``gate`` when nothing was retrieved) and what the answer cited."""

    id: str
    bucket: str
    expect: str  # "answer" | "refuse"
    signals: Signals
    after_gate: str | None = None  # None: not asked end to end (gate only)
    cited: tuple[str, ...] = ()
    sources: tuple[str, ...] = ()

    @property
    def refused_after_gate(self) -> bool:
        return self.after_gate is not None and self.after_gate != "answered"


@dataclass(frozen=True)
class Fitted:
    """A policy's threshold, its model (``learned``), the values it was chosen on, and the
    covered refusals it was allowed."""

    policy: str
    threshold: float
    model: learned.LearnedModel | None
    values: np.ndarray
    allowed: int


def spec_of(policy: str) -> str:
    """The canonical spec (``combined`` -> ``combined:0.5``); ``learned`` needs no model here."""
    return "learned" if policy == "learned" else gate.get_policy(policy).spec


def covered_mask(observations: Sequence[Observation]) -> np.ndarray:
    return np.array([o.expect == "answer" for o in observations], dtype=bool)


def after_mask(observations: Sequence[Observation]) -> np.ndarray:
    return np.array([o.refused_after_gate for o in observations], dtype=bool)


def values(observations: Sequence[Observation], policy: str,
           model: learned.LearnedModel | None = None) -> np.ndarray:
    """Each question's value under ``policy``; -inf where nothing was retrieved."""
    if not observations:
        return np.zeros(0)
    retrieved = np.array([o.signals.n_context > 0 for o in observations])
    if policy == "learned":
        if model is None:
            raise ValueError("the learned policy's values need its model")
        v = model.values([o.signals for o in observations])
    else:
        rule = gate.get_policy(policy)
        v = np.array([rule.value(o.signals) for o in observations], dtype=np.float64)
    return np.where(retrieved, v, -np.inf)


def choose_threshold(v: np.ndarray, covered: np.ndarray, max_covered_refusal: float,
                     after: np.ndarray | None = None, allowed: int | None = None) -> float:
    """The threshold refusing the most questions with at most ``allowed`` covered refusals
    (``floor(max_covered_refusal * covered)`` if not given); ``after`` marks questions refused
    after the gate whatever the threshold. When more covered questions than that are refused
    whatever the threshold (nothing retrieved, or refused after the gate), the threshold
    refuses no covered question beyond them."""
    if allowed is None:
        allowed = allowed_refusals(int(covered.sum()), max_covered_refusal)
    anyway = np.zeros(len(v), dtype=bool) if after is None else after
    allowed = max(allowed, int((covered & (anyway | ~np.isfinite(v))).sum()))
    finite = np.unique(v[np.isfinite(v)])
    best = None
    for j, cut in enumerate(finite):  # a threshold at ``cut`` refuses every value below it
        if int((covered & ((v < cut) | anyway)).sum()) > allowed:
            break
        best = j
    if best is None:  # no finite value: nothing was retrieved for any question
        return 0.0
    if best == 0:
        return float(finite[0])
    return float((finite[best - 1] + finite[best]) / 2)


def weights(observations: Sequence[Observation]) -> np.ndarray:
    """Covered questions and the questions to refuse weigh half each in total, each refuse
    bucket the same share of its half; the weights sum to the number of questions."""
    n = len(observations)
    covered = covered_mask(observations)
    refuse = sorted({o.bucket for o, c in zip(observations, covered, strict=True) if not c})
    counts = {b: sum(o.bucket == b and not c for o, c in zip(observations, covered, strict=True))
              for b in refuse}
    out = np.empty(n)
    for i, (o, c) in enumerate(zip(observations, covered, strict=True)):
        if c:
            out[i] = (n / 2 if refuse else n) / covered.sum()
        else:
            out[i] = (n / 2 if covered.any() else n) / len(refuse) / counts[o.bucket]
    return out


def fit_model(observations: Sequence[Observation]) -> learned.LearnedModel:
    """The learned model on the questions where something was retrieved (weighted)."""
    kept = [o for o in observations if o.signals.n_context > 0] or list(observations)
    return learned.fit([o.signals for o in kept], covered_mask(kept), weights(kept))


def usable_folds(observations: Sequence[Observation], folds: int = crossval.FOLDS) -> int:
    """How many folds the labels allow (``crossval.usable_folds``)."""
    covered = covered_mask(observations)
    return crossval.usable_folds([int(covered.sum()), int((~covered).sum())], folds)


def cross_fitted(observations: Sequence[Observation], folds: int = crossval.FOLDS) -> np.ndarray:
    """Each question's learned value from the model fitted without its fold (in-sample when
    the labels allow fewer than two folds)."""
    k = usable_folds(observations, folds)
    if k < 2:
        return values(observations, "learned", fit_model(observations))
    fold = crossval.folds([o.bucket for o in observations], k)

    def fit_apply(train: np.ndarray, test: np.ndarray) -> np.ndarray:
        model = fit_model([observations[i] for i in train])
        return values([observations[i] for i in test], "learned", model)

    return crossval.out_of_fold(fold, fit_apply)


def fit(observations: Sequence[Observation], policy: str, budget: float,
        guarantee: float | None = None, end_to_end: bool = False, folds: int = crossval.FOLDS,
        ) -> Fitted:
    """Choose ``policy``'s threshold (and model) on ``observations``. ``allowed`` is -1 when the
    guarantee cannot be met with these questions; the threshold then refuses no covered one
    the sweep can keep (``allowed`` 0)."""
    covered = covered_mask(observations)
    allowed = allowed_refusals(int(covered.sum()), budget, guarantee)
    model = None
    if policy == "learned":
        model = fit_model(observations)
        v = cross_fitted(observations, folds)
    else:
        v = values(observations, policy)
    threshold = choose_threshold(v, covered, budget, after_mask(observations) if end_to_end else None,
                                 max(allowed, 0))
    return Fitted(policy, threshold, model, v, allowed)


def refused(observations: Sequence[Observation], fitted: Fitted, end_to_end: bool = False,
            ) -> np.ndarray:
    """Who the fitted gate refuses (decided by the gate itself), and with ``end_to_end`` who
    ``ask`` refuses after it."""
    the_gate = gate.ThresholdGate(fitted.policy, fitted.threshold, model=fitted.model)
    out = np.array([not the_gate.decide(o.signals).answer for o in observations], dtype=bool)
    return out | after_mask(observations) if end_to_end else out


def out_of_fold(observations: Sequence[Observation], policy: str, budget: float,
                guarantee: float | None, end_to_end: bool, folds: int) -> np.ndarray:
    """Each question refused or not by the policy fitted without its fold."""
    fold = crossval.folds([o.bucket for o in observations], folds)

    def fit_apply(train: np.ndarray, test: np.ndarray) -> np.ndarray:
        part = [observations[i] for i in train]
        return refused([observations[i] for i in test],
                       fit(part, policy, budget, guarantee, end_to_end, folds), end_to_end)

    return crossval.out_of_fold(fold, fit_apply)


def auc(v: np.ndarray, covered: np.ndarray) -> float:
    """P(covered value > other value), ties counted half; nan without both kinds."""
    pos, neg = v[covered], v[~covered]
    if not len(pos) or not len(neg):
        return float("nan")
    greater = (pos[:, None] > neg[None, :]).mean()
    ties = (pos[:, None] == neg[None, :]).mean()
    return float(greater + 0.5 * ties)
