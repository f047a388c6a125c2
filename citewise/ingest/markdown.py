"""Markdown (and plain text) into sections: ATX headings make the tree, blank lines the
paragraphs, ``|`` rows the tables.

Every step is linear in the text: headings are read by string methods, not by a regular
expression that backtracks (``^(#{1,6})\\s+(.+?)\\s*#*\\s*$`` took 30 s on one 2 KB line), and a
paragraph is joined once from its lines, not grown line by line.
"""

from __future__ import annotations

import re

from citewise.records import Section, SectionKind

_ITEM = re.compile(r"^([-*+•]|\d+[.)])\s+")


def is_list_item(text: str) -> bool:
    return bool(_ITEM.match(text.lstrip()))


def paragraphs(lines: list[str]) -> list[str]:
    """Join wrapped lines into paragraphs. Blank lines separate paragraphs; the items of one
    list stay in one paragraph, one item a line; a list after prose starts a paragraph."""
    paras: list[str] = []
    buf: list[str] = []  # the paragraph's pieces, each led by its separator but the first
    in_list = False
    for line in lines:
        stripped = line.strip()
        if not stripped:
            if buf:
                paras.append("".join(buf))
            buf, in_list = [], False
            continue
        if is_list_item(stripped):
            if buf and not in_list:
                paras.append("".join(buf))
                buf = []
            buf.append(f"\n{stripped}" if buf else stripped)
            in_list = True
        else:
            buf.append(f" {stripped}" if buf else stripped)
    if buf:
        paras.append("".join(buf))
    return paras


def heading(line: str) -> tuple[int, str] | None:
    """``(level, text)`` of an ATX heading line, else None.

    The same result as ``re.match(r"^(#{1,6})\\s+(.+?)\\s*#*\\s*$", line)`` with the text
    ``group(2).strip()``, closing ``#`` run and all, in one pass: that expression backtracks
    cubically on a heading with a long run of spaces inside it.
    """
    level = len(line) - len(line.lstrip("#"))
    if not 1 <= level <= 6:
        return None
    rest = line[level:]
    body = rest.lstrip()
    spaces = len(rest) - len(body)
    if spaces == 0:
        return None
    if not body:  # "#" and white space only: a heading with no text, if two or more spaces
        return (level, "") if spaces > 1 else None
    text = body.rstrip().rstrip("#").rstrip()  # less the closing "  ##  "
    return level, text or body[0]  # all "#": the lazy group kept one of them


_FAQ_HEADING = re.compile(r"\b(faq|frequently asked|questions?|q\s*&\s*a)\b", re.I)
_STRUCTURED_HEADING = re.compile(r"\b(pricing|prices?|specs?|specifications?|faq)\b", re.I)
_TABLE_RULE = re.compile(r"\|[\s:|-]+\|?")


def _kind(heading: tuple[str, ...], lines: list[str]) -> SectionKind:
    if any(line.lstrip().startswith("|") for line in lines):
        return "table"
    question = len(heading) > 1 and heading[-1].rstrip().endswith("?")
    if question and any(_FAQ_HEADING.search(h) for h in heading[:-1]):
        return "faq"
    if heading and _STRUCTURED_HEADING.search(heading[-1]):
        return "faq"
    return "text"


def parse_markdown(text: str, fallback_title: str) -> tuple[str, list[Section]]:
    """ATX headings (``#`` to ``######``) make the section tree; the first ``#`` is the title."""
    title = ""
    path: list[str] = []
    sections: list[Section] = []
    lines: list[str] = []
    in_fence = False

    def flush() -> None:
        heading = tuple(path)
        table_rows = [ln.strip() for ln in lines if ln.strip().startswith("|")]
        paras = [
            p for p in paragraphs([ln for ln in lines if not ln.strip().startswith("|")]) if p
        ]
        if table_rows:
            rows = [r for r in table_rows if not _TABLE_RULE.fullmatch(r)]
            paras.append("\n".join(rows))
        if paras:
            sections.append(Section(heading, tuple(paras), _kind(heading, lines)))
        lines.clear()

    for line in text.splitlines():
        if line.strip().startswith("```"):
            in_fence = not in_fence
            continue
        found = None if in_fence else heading(line)
        if not found:
            lines.append(line)
            continue
        flush()
        level, name = found
        if level == 1 and not title:
            title = name
            path = []
            continue
        depth = max(level - 1, 1) if title else level
        path = path[: depth - 1] + [name]
    flush()
    return title or fallback_title, sections
