"""What a person reads when a question is not (fully) answered, in plain words.

The numbers behind a refusal (the gate's policy, signal and threshold) stay in the result's
``decision`` (``gate`` in JSON); the reason says what happened in words a patient or a
customer understands, and offers the closest topics the collection does have.
"""

from __future__ import annotations

from collections.abc import Sequence

from citewise.records import Candidate

RELATED_TOPICS = 5

NOT_COVERED = "This collection does not cover your question, so it is not answered."
NO_PART_COVERED = "This collection does not cover any part of your question, so it is not answered."
NOT_SUPPORTED = ("The passages found do not clearly answer your question, so no answer is given "
                 "rather than a guess.")
NO_ANSWER_FOUND = "The passages found do not answer your question, so it is not answered."


def offer(related: Sequence[str], closest: str = "") -> str:
    """What follows a refusal's first sentence: the closest passage (``closest_passage``) and
    the closest topics, or, when nothing comes close, what to try instead."""
    if related:
        return " ".join(filter(None, (closest, "The closest topics it does cover are: "
                                      + "; ".join(related) + ". You can ask about one of those instead.")))
    if closest:
        return closest
    return ("Nothing in it comes close; check that you are asking the right collection, or "
            "rephrase the question in the words its documents would use.")


def closest_passage(heading: str, unit: str, words: int = 30) -> str:
    """The sentence naming the passage that came closest to answering."""
    ws = unit.split()
    quote = " ".join(ws[:words]) + (" …" if len(ws) > words else "")
    return f"The closest passage, in “{heading}”, says: “{quote}”."


def refusal(statement: str, related: Sequence[str], closest: str = "") -> str:
    return f"{statement} {offer(related, closest)}"


def _body(question: str) -> str:
    return question.strip().rstrip(" ?.!")


def uncovered(parts: Sequence[str]) -> str:
    """The sentence an answer ends with when its sources cover only some parts of it."""
    quoted = [f"“{_body(p)}”" for p in parts]
    if len(quoted) == 1:
        return (f"The sources here do not cover {quoted[0]}, so that part of your question is "
                "not answered.")
    names = ", ".join(quoted[:-1]) + " or " + quoted[-1]
    return f"The sources here do not cover {names}, so those parts of your question are not answered."


def topic_question(topic: str) -> str:
    """The follow-up question a related topic offers (a click in the widget or console):
    its heading path as words, ``Varenicline › Dosing schedule`` -> ``Varenicline: Dosing
    schedule``."""
    return ": ".join(part.strip() for part in topic.split("›") if part.strip())


def related_topics(chunks: Sequence[Candidate], limit: int = RELATED_TOPICS,
                   floor: float | None = None) -> tuple[str, ...]:
    """Distinct section headings of the best chunks, best first: what the collection did have.

    Chunks whose cosine is below ``floor`` (the gate's measured level of unrelated questions)
    are not close to the question, and their headings are not offered.
    """
    topics: dict[str, None] = {}
    for c in chunks:
        if floor is not None and c.cosine < floor:
            continue
        label = c.chunk.heading or c.chunk.doc_id
        if c.chunk.title and c.chunk.section and c.chunk.section[0] != c.chunk.title:
            label = f"{c.chunk.title} › {label}"
        topics.setdefault(label, None)
    return tuple(list(topics)[:limit])
