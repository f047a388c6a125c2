"""Text every store can keep: no NUL character (PostgreSQL's ``text`` has none, and it answered
a question holding one with 503) and no lone surrogate (a ``\\ud800`` from a JSON escape,
which no store can encode as UTF-8). Checked where text enters the library: questions,
names, key labels, origins, feedback comments; an id holding such text cannot be stored, so
looking one up finds nothing without asking the store.

A name (a file's, a path parameter) holds no control character either, nor a bidirectional
control (a right-to-left override shows ``invoice<U+202E>gpj.md`` as ``invoicedm.jpg``), and is
kept in one Unicode form (``name_form``: NFC, so "é" typed as one character or as "e" and an
accent is one name).
"""

from __future__ import annotations

import re
import unicodedata

from citewise.errors import CitewiseError, QueryError

_BAD = re.compile("[\x00\ud800-\udfff]")
_CONTROL = re.compile("[\x00-\x1f\x7f]")
_BIDI = re.compile("[\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def problem(text: str) -> str | None:
    """What makes ``text`` unstorable (``"a NUL character"``, ...), or None when it is fine."""
    found = _BAD.search(text)
    if found is None:
        return None
    if found.group() == "\x00":
        return "a NUL character"
    return f"a lone surrogate (U+{ord(found.group()):04X})"


def unprintable(text: str) -> str | None:
    """``problem(text)``, or ``"a control character"``, or ``bidi_control(text)``: what a name
    (a file's, a path parameter) may not hold either."""
    return (problem(text) or ("a control character" if _CONTROL.search(text) else None)
            or bidi_control(text))


def bidi_control(text: str) -> str | None:
    """``"a bidirectional control character (U+202E)"`` if ``text`` holds one, else None."""
    found = _BIDI.search(text)
    return None if found is None else f"a bidirectional control character (U+{ord(found.group()):04X})"


def name_form(name: str) -> str:
    """``name`` in the one Unicode form names are kept in (NFC)."""
    return name if name.isascii() else unicodedata.normalize("NFC", name)


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
