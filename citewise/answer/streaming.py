"""Streaming an answer without letting an unchecked sentence out.

A streaming generator yields text in pieces. ``sentences`` gathers them into complete
sentences (a sentence is complete once the next one has started with a word, so a ``[n]``
marker written after the period still reaches the sentence it belongs to); the engine checks
each one with ``citations.Checker`` and passes on only those that hold, as ``Sentence``
events. ``Final`` carries the Answer or Refusal, the same one ``Engine.ask`` would return for
the whole draft. This is the shape the HTTP service sends as server-sent events.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from citewise.answer.citations import parse
from citewise.records import Answer, Citation, Refusal

_WORD = re.compile(r"[A-Za-z]")


@dataclass(frozen=True)
class Sentence:
    """One checked sentence of the answer, with its markers renumbered as in the final text;
    ``citations`` are the passages it cites for the first time."""

    text: str
    citations: tuple[Citation, ...]


@dataclass(frozen=True)
class Final:
    result: Answer | Refusal


def sentences(pieces: Iterable[str], raw: list[str]) -> Iterator[tuple[str, tuple[int, ...]]]:
    """Complete sentences, with what they cite, as the pieces arrive; every piece is also
    appended to ``raw`` so the caller has the whole draft when the stream ends."""
    buffer = ""
    for piece in pieces:
        raw.append(piece)
        buffer += piece
        parsed = parse(buffer)
        if len(parsed) < 2 or not _WORD.search(parsed[-1][0]):
            continue
        done = parsed[:-1]
        # cut the raw text where the finished sentences end, markers included
        cut = next((i for i in range(len(buffer) - 1, 0, -1)
                    if buffer[i].isspace() and parse(buffer[:i]) == done), None)
        if cut is not None:
            yield from done
            buffer = buffer[cut:]
    yield from parse(buffer)
