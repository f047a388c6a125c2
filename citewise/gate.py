"""The refusal gate: decide from raw cosines whether the context can support an answer.

Two policies, one from each production system in DESIGN.md:

- ``top1``: the highest cosine among the retrieved chunks must reach the threshold
  (the clinical system's gate);
- ``mean``: the mean cosine of the chunks that reach the context must reach it
  (the multi-tenant system's gate).

Thresholds belong to an embedder and the retrieval settings they were measured with. A
knowledge base stores its own (``GateSetting``); without one, or when its fingerprint no longer
matches, the shipped default for the embedder is used and the answer carries a warning.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import numpy as np

from .errors import ConfigError, UnknownNameError
from .kb import GateSetting, KBConfig
from .records import Candidate, Decision, Signals

# Shipped defaults, measured, not copied from the production systems (whose numbers belong to
# other models). How: `python benchmarks/default_gate.py` ingests the sample collection with the
# model, runs the *train* split of its labelled questions (examples/queries/
# smoking-cessation.train.jsonl: 40 covered, 20 thin, 20 out of scope) through retrieval, and
# takes the highest threshold that still answers 95% of covered questions (midway between the
# lowest covered signal it must keep and the next signal below). On 2026-11-30 it printed:
#   top1: covered 0.509-0.866, thin 0.410-0.617, out of scope 0.043-0.318 -> 0.548
#         (train refusal: covered 5%, thin 55%, out of scope 100%)
#   mean: covered 0.245-0.720, thin 0.323-0.554, out of scope -0.010-0.273 -> 0.352
#         (train refusal: covered 5%, thin 5%, out of scope 100%)
# top1 separates better, so it is the default policy. `citewise calibrate` replaces these per
# knowledge base from its own labelled questions.
DEFAULT_THRESHOLDS: dict[tuple[str, str], float] = {
    ("local:all-MiniLM-L6-v2", "top1"): 0.548,
    ("local:all-MiniLM-L6-v2", "mean"): 0.352,
}
FALLBACK_POLICY = "top1"
POLICIES = ("top1", "mean")


def signals(context: Sequence[Candidate], candidates: Sequence[Candidate]) -> Signals:
    """Top-1 cosine over every candidate, mean cosine over the context."""
    if not candidates:
        return Signals(0.0, 0.0, 0)
    top1 = max(c.cosine for c in candidates)
    mean = float(np.mean([c.cosine for c in context])) if context else 0.0
    return Signals(float(top1), mean, len(context))


class Gate(Protocol):
    policy: str
    threshold: float

    def decide(self, s: Signals) -> Decision: ...


class ThresholdGate:
    """Answer when the policy's signal reaches the threshold."""

    def __init__(self, policy: str, threshold: float) -> None:
        if policy not in POLICIES:
            raise UnknownNameError("gate policy", policy, list(POLICIES))
        if not -1.0 <= threshold <= 1.0:
            raise ConfigError(f"A cosine threshold lies in [-1, 1], not {threshold}")
        self.policy, self.threshold = policy, threshold

    def decide(self, s: Signals) -> Decision:
        value = s.top1 if self.policy == "top1" else s.mean
        if s.n_context == 0:
            return Decision(False, self.policy, 0.0, self.threshold, "nothing was retrieved")
        if value >= self.threshold:
            return Decision(True, self.policy, value, self.threshold)
        label = "top-1 cosine" if self.policy == "top1" else "mean context cosine"
        return Decision(
            False, self.policy, value, self.threshold,
            f"the best match is too weak: {label} {value:.3f} is below the threshold "
            f"{self.threshold:.3f}",
        )


def default_setting(config: KBConfig, policy: str = FALLBACK_POLICY) -> GateSetting:
    """The shipped, measured default for the knowledge base's embedder (0.5 if none)."""
    threshold = DEFAULT_THRESHOLDS.get((config.embedder, policy))
    source = "default" if threshold is not None else "unmeasured"
    return GateSetting(policy, 0.5 if threshold is None else threshold, config.embedder,
                       config.fingerprint(), source)


def gate_for(config: KBConfig) -> tuple[ThresholdGate, list[str]]:
    """The gate a knowledge base uses now, and warnings a person should see."""
    warnings: list[str] = []
    setting = config.gate
    if setting is not None and setting.fingerprint != config.fingerprint():
        warnings.append(
            f"The gate threshold was set for {setting.embedder} with other retrieval settings; "
            "it is uncalibrated until `citewise calibrate` runs again. Using the default."
        )
        setting = None
    if setting is None:
        setting = default_setting(config)
        if setting.source == "unmeasured":
            warnings.append(
                f"No measured threshold exists for {config.embedder}; the gate uses 0.5 until "
                "`citewise calibrate` sets one from labelled questions."
            )
    return ThresholdGate(setting.policy, setting.threshold), warnings
