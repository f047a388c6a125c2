"""Questions with several parts: split, each part decided alone, the covered parts' passages.

``split(question)`` cuts a question at each question mark followed by another question, and
at a conjunction that starts a new question (", and what ...", "and how ...", "but is ...",
"; what ..."); each side of a cut must have a content word of its own, or it stays joined
("how and why does ..." is one question), and what follows a question mark must ask
something (end with "?" or start with a question word or an auxiliary): "What does the zebra
formula use? saffron violet dust" is one question with its keywords. Later parts are made
standalone from the earlier ones ("What is varenicline and how is it dosed?" -> "What is
varenicline?", "how is varenicline dosed?").

The engine passes each part through the gate on its own (``Engine._parts``); ``joint`` is the
decision on the whole, and ``merged`` the covered parts' passages the answer is drawn from.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import replace

from citewise.answer.followup import has_content, standalone
from citewise.records import Candidate, Decision, Part

# what starts a new question: a question word, or an auxiliary not followed by "not"
OPENER = (r"(?:what|how|why|when|where|who|which|whose"
          r"|(?:is|are|was|were|do|does|did|can|could|should|would|will|has|have)\s+(?!not\b))")
CONJUNCTION = re.compile(r"\s*[,;]?\s+(?:and|but|also|plus)\s+(?:also\s+)?(?=" + OPENER + r"\b)"
                         r"|\s*;\s+(?=" + OPENER + r"\b)", re.I)


def split(question: str) -> tuple[str, ...]:
    """The parts of a question with several (module docstring); one part if it has one.
    Each part is made standalone from the parts before it."""
    text = question.strip()
    cuts = [(m.end(), m.end()) for m in re.finditer(r"\?\s+(?=\S)", text)]
    cuts += [(m.start(), m.end()) for m in CONJUNCTION.finditer(text)]
    spans, at = [], 0
    for end, start in sorted(cuts):
        if end <= at:
            continue
        left, right = text[at:end], _until_next(text[start:])
        # a cut whose either side has no word of its own ("how and why does ...") is no cut,
        # nor is one before words that do not ask ("... use? saffron violet dust")
        if has_content(left) and has_content(right) and _asks(right):
            spans.append(left)
            at = start
    spans.append(text[at:])
    parts = [p.strip(" ,;") for p in spans if p.strip(" ,;")]
    if len(parts) < 2:
        return (question,)
    shown = [p if p.endswith(("?", ".", "!")) else p + "?" for p in parts]
    return tuple(standalone(p, shown[:i], ellipsis=False) if i else p
                 for i, p in enumerate(shown))


def _asks(text: str) -> bool:
    """Whether ``text`` reads as a question: it ends with "?" or starts like one."""
    return text.rstrip().endswith("?") or re.match(OPENER, text.strip(), re.I) is not None


def _until_next(text: str) -> str:
    """``text`` up to its next question mark or conjunction that starts a new question."""
    m = CONJUNCTION.search(text)
    end = min(m.start() if m else len(text), (text.find("?") + 1) or len(text))
    return text[:end]


def joint(whole: Decision, covered: Sequence[Part]) -> Decision:
    """The decision on a question with several parts: answered when the sources cover one
    part or more (the whole question's own decision, or else the best covered part's)."""
    if not covered:
        return replace(whole, answer=False,
                       reason="no part of the question reaches the threshold on its own")
    if whole.answer:
        return whole
    return max((p.decision for p in covered), key=lambda d: d.signal)


def merged(contexts: Sequence[Sequence[Candidate]], limit: int) -> tuple[Candidate, ...]:
    """The covered parts' contexts taken in turn (best of each first), each chunk once."""
    out: dict[str, Candidate] = {}
    for rank in range(max(len(c) for c in contexts)):
        for context in contexts:
            if rank < len(context) and len(out) < limit:
                out.setdefault(context[rank].chunk.id, context[rank])
    return tuple(out.values())
