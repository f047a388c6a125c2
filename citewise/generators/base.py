"""The generator protocol: one method, ``generate(question, context) -> Draft``.

``context`` is the numbered passage list the prompt shows (passage ``n`` is ``context[n-1]``);
a draft cites passages with ``[n]`` markers. Whatever a generator returns goes through the
citation check before anyone sees it. A generator whose provider streams also has
``stream(question, context)``, yielding the draft's text in pieces (``StreamingGenerator``);
the engine checks each sentence as it completes and only passes on sentences that hold.
A generator that gives up raises ``GenerationError``; the engine turns that into a refusal.
A generator with a model behind it also has ``condense(question, history)``, which makes a
follow-up question standalone (``CondensingGenerator``); without one, the engine does it
offline (``followup.py``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Protocol, runtime_checkable

from citewise.generators.prompts import FALLBACK
from citewise.hosted import Unusable
from citewise.records import Candidate, Draft, Turn


class Generator(Protocol):
    name: str

    def generate(self, question: str, context: Sequence[Candidate]) -> Draft: ...


@runtime_checkable
class StreamingGenerator(Protocol):
    name: str

    def generate(self, question: str, context: Sequence[Candidate]) -> Draft: ...

    def stream(self, question: str, context: Sequence[Candidate]) -> Iterator[str]: ...


@runtime_checkable
class CondensingGenerator(Protocol):
    name: str

    def condense(self, question: str, history: Sequence[Turn]) -> str: ...


def usable(text: str, name: str, check: Callable[[str], str] | None = None) -> Draft:
    """A hosted model's reply as a draft: ``Unusable`` (retried) when it has no text, and not
    retried when ``check`` (which may rewrite it) refuses it with ``ValueError``."""
    text = text.strip()
    if not text:
        raise Unusable("the response had no text")
    if check is not None:
        try:
            text = check(text)
        except ValueError as e:
            raise Unusable(str(e), retry=False) from None
    return Draft(text, name)


__all__ = ["FALLBACK", "CondensingGenerator", "Generator", "StreamingGenerator"]
