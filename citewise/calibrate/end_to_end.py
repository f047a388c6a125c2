"""End to end: what ``ask`` returns for labelled questions, counted per bucket.

The gate decides whether a question reaches the generator, but what a person sees is decided
after it too: the citation check refuses when no sentence of the draft holds, and a provider
can fail. ``run`` asks every labelled question through ``Engine.ask``, the call the CLI and the
API make (with the knowledge base's own gate, generator and retrieval settings; the query log
is left alone), and keeps where each one ended:

- ``path``: ``answered``, or the step that refused it (``Refusal.path``: ``gate``,
  ``citation_check``, ``generation_failed``);
- the gate's decision in that same ``ask``, so the gate-only rates read from these runs are
  exactly the gate's share of the end-to-end ones;
- the documents the answer cites.

``summarise`` gives each bucket's end-to-end refusal rate with its exact Clopper-Pearson 95%
interval (``rates.refusal_rates``), the gate-only rate from the same runs, counts by the
step that refused, and **covered answered with source**: the share of covered questions
(``expect: "answer"``) answered with at least one citation of a document their ``sources``
name.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from citewise.answer.gate import Gate
from citewise.calibrate.intervals import clopper_pearson
from citewise.calibrate.querysets import LabelledQuery
from citewise.calibrate.rates import Rate, bucket_of, refusal_rates
from citewise.calibrate.thresholds import Observation
from citewise.engine import Engine
from citewise.kb import KnowledgeBase
from citewise.records import Answer, Refusal

STEPS = ("gate", "citation_check", "generation_failed")  # always reported, even at 0
STEP_NAMES = {"gate": "gate", "citation_check": "check", "generation_failed": "failed"}


@dataclass(frozen=True)
class Outcome:
    """Where one labelled question ended when asked."""

    id: str
    bucket: str
    expect: str
    path: str  # "answered", or the step that refused it
    gate_answered: bool
    cited: tuple[str, ...]  # documents the answer cites
    sources: tuple[str, ...]  # documents the question is labelled with

    @property
    def refused(self) -> bool:
        return self.path != "answered"

    @property
    def with_source(self) -> bool:
        return not self.refused and bool(set(self.cited) & set(self.sources))


def outcome(q: LabelledQuery, bucket: str, result: Answer | Refusal) -> Outcome:
    cited = tuple(dict.fromkeys(c.doc_id for c in result.citations)) \
        if isinstance(result, Answer) else ()
    path = "answered" if isinstance(result, Answer) else result.path
    return Outcome(q.id, bucket, str(q.expect), path, result.decision.answer, cited,
                   tuple(d for d, g in q.relevant.items() if g > 0))


def run(engine: Engine, kb: KnowledgeBase, queries: Iterable[LabelledQuery],
        label: Callable[[LabelledQuery], str] = bucket_of,
        progress: Callable[[int], None] | None = None) -> tuple[Outcome, ...]:
    """Ask every question with ``expect`` as ``ask`` does (``label`` names its bucket)."""
    out = []
    for q in queries:
        if q.expect is None:
            continue
        out.append(outcome(q, label(q), engine.ask(kb, q.query, log=False)))
        if progress:
            progress(1)
    return tuple(out)


def at_gate(observations: Sequence[Observation], the_gate: Gate) -> tuple[Outcome, ...]:
    """What ``ask`` returns at ``the_gate`` for questions asked with the gate open
    (``calibration.collect(..., answers=True)``): refused at the gate, or where the open ask
    ended. The generator sees the same context whatever the threshold, so this is what asking
    again at ``the_gate`` returns, without asking."""
    out = []
    for o in observations:
        if o.after_gate is None:
            raise ValueError(f"question {o.id} was not asked end to end")
        answered = the_gate.decide(o.signals).answer
        path = o.after_gate if answered else "gate"
        out.append(Outcome(o.id, o.bucket, o.expect, path, answered,
                           o.cited if path == "answered" else (), o.sources))
    return tuple(out)


@dataclass(frozen=True)
class EndToEnd:
    generator: str
    gate: tuple[Rate, ...]  # the gate alone, in the same runs
    buckets: tuple[Rate, ...]  # what ``ask`` returned
    refused_at: dict[str, dict[str, int]]  # bucket -> step -> refused there
    covered: int  # questions with expect "answer"
    with_source: int  # of those, answered citing one of their sources
    outcomes: tuple[Outcome, ...] = field(repr=False, compare=False, default=())

    @property
    def labelled(self) -> int:
        return len(self.outcomes)

    @property
    def answered(self) -> int:
        return sum(not o.refused for o in self.outcomes)

    @property
    def with_source_share(self) -> float | None:
        return self.with_source / self.covered if self.covered else None

    def steps(self) -> dict[str, int]:
        """Refusals by the step that refused, over every bucket."""
        total: dict[str, int] = {}
        for counts in self.refused_at.values():
            for step, n in counts.items():
                total[step] = total.get(step, 0) + n
        return total


def summarise(outcomes: Sequence[Outcome], generator: str) -> EndToEnd:
    refused_at: dict[str, dict[str, int]] = {}
    for o in outcomes:
        counts = refused_at.setdefault(o.bucket, dict.fromkeys(STEPS, 0))
        if o.refused:
            counts[o.path] = counts.get(o.path, 0) + 1
    covered = [o for o in outcomes if o.expect == "answer"]
    return EndToEnd(generator, refusal_rates((o.bucket, not o.gate_answered) for o in outcomes),
                    refusal_rates((o.bucket, o.refused) for o in outcomes),
                    refused_at, len(covered), sum(o.with_source for o in covered),
                    tuple(outcomes))


def to_dict(e: EndToEnd) -> dict[str, Any]:
    """The ``end_to_end`` object of ``eval --json`` and ``calibrate --json`` (docs/calibration.md)."""
    share = e.with_source_share
    return {
        "generator": e.generator,
        "labelled": e.labelled,
        "answered": e.answered,
        "answered_share": round(e.answered / e.labelled, 4) if e.labelled else 0.0,
        "buckets": {b.bucket: {"n": b.n, "refused": b.refused, "refusal_rate": round(b.rate, 4),
                               "low": round(b.low, 4), "high": round(b.high, 4),
                               "refused_at": e.refused_at[b.bucket]} for b in e.buckets},
        "refused_at": e.steps(),
        "covered_answered_with_source": None if share is None else round(share, 4),
    }


def _side(r: Rate) -> str:
    return f"{r.refused:>8}{r.rate:>8.1%}  [{r.low:>6.1%}, {r.high:>6.1%}]"


SIDE = f"{'refused':>8}{'rate':>8}  {'95% interval':<16}"


def table(e: EndToEnd) -> str:
    """Gate-only and end-to-end refusal per bucket, side by side, and where refusals happened."""
    steps = list(dict.fromkeys([*STEPS, *e.steps()]))
    lines = [f"end to end (gate, {e.generator} generator, citation check): answered "
             f"{e.answered}/{e.labelled}" + (f" ({e.answered / e.labelled:.1%})" if e.labelled else ""),
             f"{'':<19}  {'gate only':<{len(SIDE)}}  {'end to end':<{len(SIDE)}}  refused at",
             f"{'bucket':<14}{'n':>5}  {SIDE}  {SIDE} "
             + "".join(f"{STEP_NAMES.get(s, s):>7}" for s in steps)]
    gate = {r.bucket: r for r in e.gate}
    for r in e.buckets:
        lines.append(f"{r.bucket:<14}{r.n:>5}  {_side(gate[r.bucket])}  {_side(r)} "
                     + "".join(f"{e.refused_at[r.bucket].get(s, 0):>7}" for s in steps))
    if e.covered:
        low, high = clopper_pearson(e.with_source, e.covered)
        lines.append(f"covered questions answered citing a labelled source: {e.with_source}/"
                     f"{e.covered} ({e.with_source / e.covered:.1%}), 95% interval "
                     f"[{low:.1%}, {high:.1%}]")
    return "\n".join(lines)
