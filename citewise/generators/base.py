"""The generator protocol: one method, ``generate(question, context) -> Draft``.

``context`` is the numbered passage list the prompt shows (passage ``n`` is ``context[n-1]``);
a draft cites passages with ``[n]`` markers. Whatever a generator returns goes through the
citation check before anyone sees it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from ..records import Candidate, Draft

FALLBACK = "The provided sources do not contain an answer to this question."


class Generator(Protocol):
    name: str

    def generate(self, question: str, context: Sequence[Candidate]) -> Draft: ...
