"""What a question and a conversation may be, checked before anything reads them (the engine,
the HTTP routes, MCP, chat): storable text of a bounded size, turns of known roles."""

from __future__ import annotations

from collections.abc import Sequence

from citewise import storable
from citewise.answer import followup
from citewise.errors import QueryError
from citewise.records import Turn

MAX_QUESTION_CHARS = 2000


def check_question(question: str) -> str:
    """The question with its whitespace collapsed; empty, oversized or unstorable ones (a NUL
    character, a lone surrogate: ``storable.py``) raise ``QueryError``."""
    question = " ".join((question or "").split())
    if not question:
        raise QueryError("The question is empty; ask something in words.")
    storable.check(question, "question")
    if len(question) > MAX_QUESTION_CHARS:
        raise QueryError(
            f"The question is {len(question):,} characters; the limit is {MAX_QUESTION_CHARS:,}. "
            "Ask about one thing at a time."
        )
    return question


def check_history(history: Sequence[Turn]) -> tuple[Turn, ...]:
    """The conversation so far, checked: at most ``followup.MAX_TURNS`` turns, each a user or
    assistant turn of at most ``followup.MAX_TURN_CHARS`` storable characters."""
    history = tuple(history)
    if len(history) > followup.MAX_TURNS:
        raise QueryError(f"The conversation has {len(history)} turns; at most "
                         f"{followup.MAX_TURNS} are read. Send the latest ones.")
    for turn in history:
        if turn.role not in ("user", "assistant"):
            raise QueryError(f"A turn's role is 'user' or 'assistant', not {turn.role!r}.")
        if len(turn.content) > followup.MAX_TURN_CHARS:
            raise QueryError(f"A turn of the conversation is {len(turn.content):,} characters; "
                             f"the limit is {followup.MAX_TURN_CHARS:,}.")
        storable.check(turn.content, "conversation turn")
    return history
