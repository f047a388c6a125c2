"""Drafting and refusing: what ``ask`` does once the gate has decided (``Engine._ask``).

An answer is drafted by the generator and checked sentence by sentence by the citation check
(``citations.Checker``); a refusal names the closest topics (``plain.py``). A generation
failure that left no checked sentence is a refusal that lists what retrieval found.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from collections.abc import Generator as Steps
from dataclasses import replace

from citewise.answer import citations, plain, streaming
from citewise.errors import GenerationError
from citewise.generators import FALLBACK, Generator, StreamingGenerator
from citewise.reader.reading import Closest
from citewise.records import Answer, Candidate, Decision, Dropped, Refusal, RefusalPath
from citewise.sentences import stems

REFUSAL_CHUNKS = 5


def generate(question: str, context: Sequence[Candidate], decision: Decision,
             generator: Generator, checker: citations.Checker, timings: dict[str, float],
             stream: bool, why: Callable[[GenerationError], str],
             floor: float | None = None, closest: Closest | None = None,
             ) -> Steps[streaming.Sentence, None, Answer | Refusal]:
    """Draft, check sentence by sentence (yielding each one kept), and decide. ``why`` says
    what a generation failure may show (``Engine._why``); ``floor``, the related-topics floor;
    ``closest``, the unit a refusal names."""
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
        return unavailable(question, context, decision, why(failure), floor)
    if draft == FALLBACK:
        return refuse(question, context, decision, "citation_check", plain.NO_ANSWER_FOUND, floor,
                      closest)
    checked = checker.result()
    dropped = tuple(Dropped(s.text, s.reason) for s in checked.dropped)
    if not checked.kept:
        return replace(refuse(question, context, decision, "citation_check",
                              plain.NOT_SUPPORTED, floor, closest), dropped=dropped)
    warnings = (f"the answer stopped early: {why(failure)}",) if failure else ()
    return Answer(question, checked.text, checked.citations, tuple(context), decision,
                  dropped, warnings=warnings, citation_precision=checked.precision)


def unavailable(question: str, context: Sequence[Candidate], decision: Decision,
                why: str, floor: float | None = None) -> Refusal:
    """Generation failed: say so, and list what retrieval found so the reader can go there."""
    refusal = refuse(question, context, decision, "generation_failed", "", floor)
    sources = "; ".join(f"[{n}] {c.chunk.doc_id} › {c.chunk.heading}"
                        for n, c in enumerate(context, 1))
    reason = (f"An answer could not be generated, so none is given ({why}). "
              f"The retrieved sources are: {sources}.")
    if refusal.related:
        reason += " Related topics: " + "; ".join(refusal.related) + "."
    return replace(refusal, reason=reason)


def refuse(question: str, chunks: Sequence[Candidate], decision: Decision,
           path: RefusalPath, statement: str, floor: float | None = None,
           closest: Closest | None = None) -> Refusal:
    """A refusal whose reason is ``statement`` (``plain.py``), the passage the reader read
    closest to answering (``closest``, named when it shares a content word with the question
    or its passage is as close as a related topic's, its cosine at ``floor``: the reader
    alone gave 0.15 to an unrelated question) and the closest topics. "Nothing comes close"
    is said only when neither is there."""
    top = tuple(sorted(chunks, key=lambda c: -c.cosine)[:REFUSAL_CHUNKS])
    related = plain.related_topics(top, floor=floor)
    near = closest is not None and (floor is None or closest.candidate.cosine >= floor
                                    or bool(stems(question) & stems(closest.unit)))
    named = plain.closest_passage(closest.candidate.chunk.heading or closest.candidate.chunk.doc_id,
                                  closest.unit) if near and closest is not None else ""
    return Refusal(question, plain.refusal(statement, related, named), related, top, decision, path)
