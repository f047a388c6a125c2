"""The refusal gate: decide from the retrieved chunks whether they can support an answer.

A policy turns the signals of one question (measured in ``signals.py``) into one number; the
gate answers when that number reaches the threshold. Policies are chosen by spec string:

- ``top1``: the highest raw cosine among the retrieved chunks (the clinical system's gate);
- ``mean``: the mean raw cosine of the chunks that reach the context (the multi-tenant
  system's gate);
- ``coverage``: the IDF-weighted share of the question's content words found in the context;
- ``pool``: the mean cosine of the dense top-k (50 by default): whether the collection is
  about the question's subject at all. On SciFact's held-out half it told covered from
  out-of-scope questions best (ROC AUC 0.991, top1 0.980) but refused almost no thin ones
  (``benchmarks/refusal.py``);
- ``combined:W``: ``top1 + W * coverage`` (``combined`` alone means W = 0.5). On the sample
  collection's train questions it refuses more on-topic-but-uncovered questions than ``top1``
  at the same share of refused covered ones (see ``citewise/calibrate/calibration.py``);
- ``margin``, ``sentence_terms``, ``sentence_cosine``, ``agreement``, ``kb_terms``: one
  signal each (the sentence-level ones are described in ``evidence.py``, ``kb_terms`` in
  ``absent.py``);
- ``grounded:W``: ``sentence_cosine - W * (1 - kb_terms)`` (``grounded`` alone means
  W = 0.25): the best context sentence's cosine, less a penalty for the share of the
  question's key terms that no chunk of the knowledge base holds at all. A thin question
  that names a subject the collection never mentions ("cytisine") finds sentences on its
  topic that score like a covered question's; the penalty is what refuses it;
- ``answerable``: the reader's probability that the best of the context units closest to the
  question answers it (``reading.py``; 0 for a knowledge base without a reader);
- ``read:W``: ``answerable - W * (1 - kb_terms)`` (``read`` alone means W = 0.25): what the
  reader says, less the same absence penalty as ``grounded``;
- ``learned``: the probability that the question is covered, from a logistic regression over
  the signals fitted by ``citewise calibrate`` on the knowledge base's labelled questions and
  stored with its threshold (``learned.py``).

Cosines are raw similarities, never fused (RRF) scores, which are ranks. The coverage IDF is
taken over the retrieval's own candidate pool (dense top-k and BM25 top-k): a question word
that few candidates contain weighs most, and one that none contains (a detail the collection
lacks) weighs most of all. It needs nothing from the store beyond what retrieval fetched.

Thresholds belong to an embedder and the retrieval settings they were measured with. A
knowledge base stores its own (``GateSetting``, written by ``citewise calibrate``); without
one, or when its fingerprint no longer matches, the shipped default for the embedder is used
and the answer carries a warning.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from citewise.answer.learned import LearnedModel
from citewise.errors import ConfigError, UnknownNameError
from citewise.kb import GateSetting, KBConfig
from citewise.records import Decision, Signals

# Shipped defaults, measured on the sample collection's train questions by
# `python -m benchmarks.default_gate`, not copied from the production systems (whose numbers
# belong to other models); how, and the numbers it printed: benchmarks/README.md, "The shipped
# default gate".
DEFAULT_THRESHOLDS: dict[tuple[str, str], float] = {
    ("local:all-MiniLM-L6-v2", "top1"): 0.472,
    ("local:all-MiniLM-L6-v2", "mean"): 0.287,
    ("local:all-MiniLM-L6-v2", "pool"): 0.176,
    ("local:all-MiniLM-L6-v2", "coverage"): 0.367,
    ("local:all-MiniLM-L6-v2", "combined:0.25"): 0.685,
    ("local:all-MiniLM-L6-v2", "combined:0.5"): 0.765,
    ("local:all-MiniLM-L6-v2", "combined:1"): 1.009,
    ("local:all-MiniLM-L6-v2", "grounded:0.25"): 0.493,
    ("local:all-MiniLM-L6-v2", "grounded:0.5"): 0.423,
    ("local:all-MiniLM-L6-v2", "grounded:1"): 0.177,
    ("local:all-MiniLM-L6-v2", "answerable"): 0.014,
    ("local:all-MiniLM-L6-v2", "read:0.25"): -0.041,
    ("local:all-MiniLM-L6-v2", "read:0.5"): -0.115,
    ("local:all-MiniLM-L6-v2", "read:1"): -0.288,
}
# Below this top-1 cosine a chunk is unrelated to the question: its heading is not offered as
# a "closest topic". Measured with the thresholds: the 95th percentile of the out-of-scope
# train questions' top-1 cosines.
DEFAULT_RELATED_FLOOR: dict[str, float] = {"local:all-MiniLM-L6-v2": 0.522}
# The default policy per embedder is the one `auto` chose on those train questions; an
# embedder nobody measured gets top1 at 0.5 and a warning until it is calibrated.
DEFAULT_POLICY: dict[str, str] = {"local:all-MiniLM-L6-v2": "grounded:0.5"}
FALLBACK_POLICY = "top1"
READING = ("answerable", "read")
DEFAULT_COMBINED_WEIGHT = 0.5
DEFAULT_GROUNDED_WEIGHT = 0.25
DEFAULT_READ_WEIGHT = 0.25


@dataclass(frozen=True)
class Policy:
    """How a policy reads the signals: ``value(signals)`` and the range that value lies in."""

    spec: str
    label: str
    value: Callable[[Signals], float]
    low: float
    high: float


def _weight(arg: str, default: float, policy: str, example: str, what: str) -> float:
    """A policy's weight from its spec's argument (``combined:0.5``): in (0, 4]."""
    try:
        weight = float(arg) if arg else default
    except ValueError:
        raise ConfigError(f"{policy} takes a weight, e.g. {policy}:{example}, not {arg!r}") from None
    if not 0.0 < weight <= 4.0:
        raise ConfigError(f"the {policy} policy's {what} weight lies in (0, 4], not {weight}")
    return weight


def _combined(arg: str) -> Policy:
    weight = _weight(arg, DEFAULT_COMBINED_WEIGHT, "combined", "0.5", "coverage")
    spec = f"combined:{weight:g}"
    return Policy(spec, f"top-1 cosine + {weight:g} x coverage",
                  lambda s: s.top1 + weight * s.coverage, -1.0, 1.0 + weight)


def _grounded(arg: str) -> Policy:
    weight = _weight(arg, DEFAULT_GROUNDED_WEIGHT, "grounded", "0.25", "absence")
    return Policy(f"grounded:{weight:g}",
                  f"best sentence's cosine - {weight:g} x share of key terms no chunk holds",
                  lambda s: s.sentence_cosine - weight * (1.0 - s.kb_terms), -1.0 - weight, 1.0)


def _read(arg: str) -> Policy:
    weight = _weight(arg, DEFAULT_READ_WEIGHT, "read", "0.25", "absence")
    return Policy(f"read:{weight:g}",
                  f"the reader's P(answers) - {weight:g} x share of key terms no chunk holds",
                  lambda s: s.answerable - weight * (1.0 - s.kb_terms), -weight, 1.0)


def _learned(model: LearnedModel | dict | None) -> Policy:
    if model is None:
        raise ConfigError("The learned gate policy needs a fitted model: run `citewise calibrate "
                          "--policy learned` (or auto) on labelled questions.")
    if not isinstance(model, LearnedModel):
        model = LearnedModel.from_dict(model)
    return Policy("learned", "learned probability that the question is covered",
                  model.value, 0.0, 1.0)


def _signal(name: str, label: str, low: float, high: float) -> Callable[[str], Policy]:
    return lambda _: Policy(name, label, lambda s: getattr(s, name), low, high)


# one signal each: (name, label, the range it lies in)
SIGNALS = (
    ("top1", "top-1 cosine", -1.0, 1.0),
    ("mean", "mean context cosine", -1.0, 1.0),
    ("coverage", "IDF-weighted coverage of the question's words", 0.0, 1.0),
    ("pool", "mean cosine of the dense top-k", -1.0, 1.0),
    ("margin", "top-1 cosine above the dense top-k mean", -2.0, 2.0),
    ("sentence_terms", "share of the question's key terms in the best sentence", 0.0, 1.0),
    ("sentence_cosine", "best context sentence's cosine", -1.0, 1.0),
    ("agreement", "dense and keyword top-5 overlap", 0.0, 1.0),
    ("kb_terms", "share of the question's key terms the knowledge base holds", 0.0, 1.0),
    ("answerable", "the reader's P(answers) of the best context unit", 0.0, 1.0),
)
POLICIES: dict[str, Callable[[str], Policy]] = {
    **{name: _signal(name, label, low, high) for name, label, low, high in SIGNALS},
    "combined": _combined,
    "grounded": _grounded,
    "read": _read,
    "learned": lambda _: _learned(None),
}


def get_policy(spec: str, model: LearnedModel | dict | None = None) -> Policy:
    """The policy a spec names: a signal (``top1``, ``mean``, ...), ``combined[:W]``,
    ``grounded[:W]``, ``read[:W]``, or ``learned`` with its fitted ``model``."""
    name, _, arg = (spec or "").partition(":")
    factory = POLICIES.get(name)
    if factory is None or (arg and name not in ("combined", "grounded", "read")):
        raise UnknownNameError("gate policy", spec, list(POLICIES))
    if name == "learned":
        return _learned(model)
    return factory(arg)


class Gate(Protocol):
    policy: str
    threshold: float

    @property
    def reads(self) -> bool: ...

    def decide(self, s: Signals) -> Decision: ...


class ThresholdGate:
    """Answer when the policy's value reaches the threshold."""

    def __init__(self, policy: str, threshold: float, related_floor: float | None = None,
                 model: LearnedModel | dict | None = None) -> None:
        self.rule = get_policy(policy, model)
        self.model = model
        if not (math.isfinite(threshold) and self.rule.low <= threshold <= self.rule.high):
            raise ConfigError(
                f"A {self.rule.spec} threshold lies in [{self.rule.low:g}, {self.rule.high:g}], "
                f"not {threshold}"
            )
        self.policy, self.threshold = self.rule.spec, threshold
        self.related_floor = related_floor

    @property
    def reads(self) -> bool:
        """Whether deciding needs the reader's ``answerable`` signal."""
        if self.policy == "learned":
            model = self.model
            features = (model.features if isinstance(model, LearnedModel)
                        else (model or {}).get("features", ()))
            return "answerable" in features
        return reads(self.policy)

    def decide(self, s: Signals) -> Decision:
        value = float(self.rule.value(s))
        if s.n_context == 0:
            return Decision(False, self.policy, 0.0, self.threshold, "nothing was retrieved")
        if value >= self.threshold:
            return Decision(True, self.policy, value, self.threshold)
        return Decision(
            False, self.policy, value, self.threshold,
            f"the best match is too weak: {self.rule.label} {value:.3f} is below the threshold "
            f"{self.threshold:.3f}",
        )


def default_setting(config: KBConfig, policy: str | None = None) -> GateSetting:
    """The shipped, measured default for the knowledge base's embedder (top1 at 0.5 if none).
    A ``learned`` policy belongs to the questions it was fitted on: its default is the
    embedder's default policy."""
    if policy == "learned":
        policy = None
    policy = policy or DEFAULT_POLICY.get(config.embedder, FALLBACK_POLICY)
    if config.reads == "none" and reads(policy):  # a policy that reads needs the reader
        policy = DEFAULT_POLICY.get(config.embedder, FALLBACK_POLICY)
        policy = FALLBACK_POLICY if reads(policy) else policy
    threshold = DEFAULT_THRESHOLDS.get((config.embedder, policy))
    source = "default" if threshold is not None else "unmeasured"
    floor = DEFAULT_RELATED_FLOOR.get(config.embedder)
    return GateSetting(policy, 0.5 if threshold is None else threshold, config.embedder,
                       config.fingerprint(), source,
                       {} if floor is None else {"related_floor": floor})


def reads(policy: str) -> bool:
    """Whether a policy reads the reader's signal (``answerable``, ``read:W``)."""
    return policy.partition(":")[0] in READING


def gate_for(config: KBConfig) -> tuple[ThresholdGate, list[str]]:
    """The gate a knowledge base uses now, and warnings a person should see."""
    warnings: list[str] = []
    setting = config.gate
    if setting is not None and config.reads == "none" and (
            reads(setting.policy) or "answerable" in setting.details.get("model", {}).get("features", ())):
        warnings.append(f"The gate policy {setting.policy} reads with the reader, which this "
                        "knowledge base does not use (reader none); using the default until "
                        "`citewise calibrate` runs again or the reader is switched back on.")
        setting = None
    if setting is not None and setting.fingerprint != config.fingerprint():
        warnings.append(
            f"The gate threshold was calibrated for {setting.embedder} with other retrieval "
            f"settings than the knowledge base now uses ({config.embedder}); the gate is "
            "uncalibrated until `citewise calibrate` runs again. Using the default."
        )
        setting = None
    if setting is None:
        setting = default_setting(config)
    if setting.source == "unmeasured":  # the default, or a policy `citewise kb set` chose
        warnings.append(
            f"No measured threshold exists for {config.embedder}; the gate uses 0.5 until "
            "`citewise calibrate` sets one from labelled questions."
        )
    floor = setting.details.get("related_floor")
    return ThresholdGate(setting.policy, setting.threshold,
                         None if floor is None else float(floor),
                         setting.details.get("model")), warnings
