"""Text every store can keep: no NUL character (PostgreSQL's ``text`` has none, and it answered
a question holding one with 503) and no lone surrogate (a ``\\ud800`` from a JSON escape,
which no store can encode as UTF-8). Checked where text enters the library: questions,
names, key labels, origins, feedback comments; an id holding such text cannot be stored, so
looking one up finds nothing without asking the store.
"""

from __future__ import annotations

import re

from .errors import CitewiseError, QueryError

_BAD = re.compile("[\x00\ud800-\udfff]")
_CONTROL = re.compile("[\x00-\x1f\x7f]")


def problem(text: str) -> str | None:
    """What makes ``text`` unstorable (``"a NUL character"``, ...), or None when it is fine."""
    found = _BAD.search(text)
    if found is None:
        return None
    if found.group() == "\x00":
        return "a NUL character"
    return f"a lone surrogate (U+{ord(found.group()):04X})"


def unprintable(text: str) -> str | None:
    """``problem(text)``, or ``"a control character"``: what a name (a file's, a path
    parameter) may not hold either."""
    return problem(text) or ("a control character" if _CONTROL.search(text) else None)


def without_unstorable(text: str) -> str:
    """``text`` with its NUL characters and lone surrogates dropped (for text a parser made,
    where they are extraction leftovers nobody reads)."""
    return text if text.isascii() and "\x00" not in text else _BAD.sub("", text)


def storable(text: str) -> bool:
    return _BAD.search(text) is None


def check(text: str, what: str, error: type[CitewiseError] = QueryError) -> str:
    """``text`` unchanged, or ``error`` saying which character no store can keep."""
    bad = problem(text)
    if bad:
        raise error(f"The {what} holds {bad}, which cannot be stored; remove it and send it again.")
    return text
