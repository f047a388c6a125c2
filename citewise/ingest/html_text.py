"""The text of an HTML page as Markdown: headings, paragraphs, top-level list items, table rows.

One walk of the parsed tree collects the page's stripped strings in order and, for each block
element, the span of them it holds; each block's text is then joined from its span. The
result is what calling ``get_text`` on every block gave (nested blocks included: a paragraph
inside a list item is its text twice), without reading nested text once per level, which
took 10 s on 30 KB of nested list items. A page nested over ``MAX_HTML_DEPTH`` elements deep,
or whose nested blocks would repeat its text over ``HTML_MAX_REPEAT`` times, is refused.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any

from citewise.errors import DocumentError

MAX_HTML_DEPTH = 200
HTML_MAX_REPEAT = 8

_HTML_BLOCKS = frozenset({"h1", "h2", "h3", "h4", "h5", "h6", "p", "li", "tr", "pre"})


@dataclasses.dataclass
class _Span:
    """An element's strings: ``strings[start:end]`` of the page's stripped strings."""

    name: str
    start: int
    in_list_item: bool
    end: int = -1
    cells: list[_Span] = dataclasses.field(default_factory=list)


def _html_spans(root: Any) -> tuple[list[str], list[_Span]]:
    """The page's stripped strings in order and the block elements with their spans: one
    walk of the tree (``get_text`` per element read nested text once per level)."""
    from bs4 import CData, NavigableString, Tag

    strings: list[str] = []
    blocks: list[_Span] = []
    rows: list[_Span] = []  # the rows open around the walk: a cell belongs to each, as find_all
    in_items = 0
    stack: list[tuple[Iterator[Any], _Span | None]] = [(iter(root.contents), None)]
    while stack:
        children, span = stack[-1]
        child = next(children, None)
        if child is None:
            stack.pop()
            if span is not None:
                span.end = len(strings)
                if span.name == "tr":
                    rows.pop()
                elif span.name == "li":
                    in_items -= 1
            continue
        if isinstance(child, NavigableString):
            if type(child) in (NavigableString, CData) and (text := child.strip()):
                strings.append(text)
            continue
        if not isinstance(child, Tag):
            continue
        if len(stack) > MAX_HTML_DEPTH:
            raise DocumentError(
                f"HTML elements nested over {MAX_HTML_DEPTH} deep; flatten it or save it as text"
            )
        span = None
        if child.name in _HTML_BLOCKS or child.name in ("td", "th"):
            span = _Span(child.name, len(strings), in_items > 0)
            if child.name in _HTML_BLOCKS:
                blocks.append(span)
            else:
                for row in rows:
                    row.cells.append(span)
            if child.name == "tr":
                rows.append(span)
            elif child.name == "li":
                in_items += 1
        stack.append((iter(child.contents), span))
    return strings, blocks


def _html_markdown(strings: list[str], blocks: list[_Span]) -> str:
    """Markdown of the block elements: headings, paragraphs, top-level list items, rows."""
    sizes = [0]
    for s in strings:
        sizes.append(sizes[-1] + len(s) + 1)
    budget = HTML_MAX_REPEAT * sizes[-1] + 100_000

    def text(span: _Span) -> str:
        nonlocal budget
        budget -= sizes[span.end] - sizes[span.start]
        if budget < 0:
            raise DocumentError(
                f"nested HTML blocks repeat its text over {HTML_MAX_REPEAT} times (tables in "
                "tables, paragraphs in list items); flatten it or save it as text"
            )
        return " ".join(strings[span.start : span.end])

    md: list[str] = []
    for span in blocks:
        if span.start == span.end or (span.name == "li" and span.in_list_item):
            continue
        if span.name == "tr":
            md.append("| " + " | ".join(text(c) for c in span.cells) + " |")
            continue
        line = " ".join(text(span).split())
        if span.name[0] == "h":
            md.append(f"\n{'#' * int(span.name[1])} {line}\n")
        elif span.name == "li":
            md.append(f"\n- {line}\n")
        else:
            md.append(f"\n{line}\n")
    return "\n".join(md)


def html_markdown(root: Any) -> str:
    """Markdown of the block elements under ``root`` (a BeautifulSoup tag)."""
    return _html_markdown(*_html_spans(root))
