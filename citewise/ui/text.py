"""Text from documents, questions and stored settings as the console shows it: through
Markdown as the characters it is, never as Markdown or HTML (``esc``)."""

from __future__ import annotations

import re

_MARKDOWN = re.compile(r"([\\`*_{}\[\]()#+\-.!|<>~$&])")


def esc(text: str) -> str:
    """Text shown through Markdown as the characters it is."""
    return _MARKDOWN.sub(r"\\\1", text).replace("\n", "  \n")
