"""Drafting and refusing: what ``ask`` does once the gate has decided (``Engine._ask``).

The gate's outcome reaches here as one record, ``Gated``. An answer is drafted by the
generator and checked sentence by sentence by the citation check (``citations.Checker``); a
refusal names the closest topics (``plain.py``). A generation failure that left no checked
sentence is a refusal that lists what retrieval found. ``generate`` returns the result with its
own timings; it changes nothing it was given.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Generator as Steps
from collections.abc import Sequence
from dataclasses import dataclass, replace

from citewise.answer import citations, plain, streaming
from citewise.errors import GenerationError
from citewise.generators import FALLBACK, Generator, StreamingGenerator
from citewise.reader.reading import Closest
from citewise.records import Answer, Candidate, Decision, Dropped, Refusal, RefusalPath
from citewise.sentences import stems

REFUSAL_CHUNKS = 5
PROVIDER_FAILED = "the generation provider failed; try again later"
log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Gated:
    """One question as the gate left it: what drafting and refusing read. ``question`` is the
    one drafted for (the standalone question, or the covered parts'); ``candidates`` what
    retrieval considered, ``context`` what the generator is shown; ``floor`` the related-topics
    floor; ``closest`` the unit the reader read as closest to answering, which a refusal names."""

    question: str
    candidates: tuple[Candidate, ...]
    context: tuple[Candidate, ...]
    decision: Decision
    floor: float | None = None
    closest: Closest | None = None


def why(failure: GenerationError, detail: bool) -> str:
    """What a generation failure may show: the provider's words (``detail``: the CLI, the
    library), or a plain sentence with them logged (the HTTP service)."""
    if detail:
        return str(failure)
    log.warning("generation failed: %s", failure)
    return PROVIDER_FAILED


def generate(gated: Gated, generator: Generator, checker: citations.Checker, stream: bool,
             detail: bool = True,
             ) -> Steps[streaming.Sentence, None, tuple[Answer | Refusal, dict[str, float]]]:
    """Draft, check sentence by sentence (yielding each one kept), and decide; the result,
    and the milliseconds spent generating and checking. ``detail``: as ``why``."""
    question, context, decision = gated.question, gated.context, gated.decision
    timings: dict[str, float] = {}
    t = time.perf_counter()
    failure: GenerationError | None = None
    raw: list[str] = []
    try:
        if stream and isinstance(generator, StreamingGenerator):  # stream: only if it can
            found = streaming.sentences(generator.stream(question, context), raw)
        else:
            raw.append(generator.generate(question, context).text)
            timings["generate_ms"] = (time.perf_counter() - t) * 1000
            found = iter(citations.parse(raw[0]))
            checker.prepare(citations.parse(raw[0]))  # one embedding call for the draft
        for text, cited in found:
            known = len(checker.numbering)
            verdict = checker.sentence(text, cited)
            if verdict.supported:
                yield streaming.Sentence(verdict.shown(checker.numbering),
                                         checker.result().citations[known:])
    except GenerationError as e:
        failure = e
    # streamed: generating and checking interleave, so one figure covers both
    spent = (time.perf_counter() - t) * 1000
    timings["check_ms" if "generate_ms" in timings else "generate_ms"] = (
        spent - timings.get("generate_ms", 0.0))
    draft = "".join(raw).strip()
    if failure is not None and not checker.kept:
        return unavailable(gated, why(failure, detail)), timings
    if draft == FALLBACK:
        return refuse(gated, context, "citation_check", plain.NO_ANSWER_FOUND), timings
    checked = checker.result()
    dropped = tuple(Dropped(s.text, s.reason) for s in checked.dropped)
    if not checked.kept:
        return replace(refuse(gated, context, "citation_check", plain.NOT_SUPPORTED),
                       dropped=dropped), timings
    warnings = (f"the answer stopped early: {why(failure, detail)}",) if failure else ()
    return Answer(question, checked.text, checked.citations, context, decision,
                  dropped, warnings=warnings, citation_precision=checked.precision), timings


def unavailable(gated: Gated, why: str) -> Refusal:
    """Generation failed: say so, and list what retrieval found so the reader can go there."""
    refusal = replace(gated, closest=None)
    refused = refuse(refusal, refusal.context, "generation_failed", "")
    sources = "; ".join(f"[{n}] {c.chunk.doc_id} › {c.chunk.heading}"
                        for n, c in enumerate(gated.context, 1))
    reason = (f"An answer could not be generated, so none is given ({why}). "
              f"The retrieved sources are: {sources}.")
    if refused.related:
        reason += " Related topics: " + "; ".join(refused.related) + "."
    return replace(refused, reason=reason)


def refuse(gated: Gated, chunks: Sequence[Candidate], path: RefusalPath, statement: str) -> Refusal:
    """A refusal of ``gated`` whose reason is ``statement`` (``plain.py``), showing ``chunks``
    (the closest first), the passage the reader read closest to answering (``closest``, named
    when it shares a content word with the question or its passage is as close as a related
    topic's, its cosine at ``floor``: the reader alone gave 0.15 to an unrelated question) and
    the closest topics. "Nothing comes close" is said only when neither is there."""
    question, floor, closest = gated.question, gated.floor, gated.closest
    top = tuple(sorted(chunks, key=lambda c: -c.cosine)[:REFUSAL_CHUNKS])
    related = plain.related_topics(top, floor=floor)
    near = closest is not None and (floor is None or closest.candidate.cosine >= floor
                                    or bool(stems(question) & stems(closest.unit)))
    named = plain.closest_passage(closest.candidate.chunk.heading or closest.candidate.chunk.doc_id,
                                  closest.unit) if near and closest is not None else ""
    return Refusal(question, plain.refusal(statement, related, named), related, top, gated.decision,
                   path)
