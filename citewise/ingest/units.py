"""Citable units: the pieces of a passage a citation can quote, split by the passage's structure.

A passage is read as blocks (blank lines, and a change between prose, list and table lines,
end a block):

- a **table** gives one unit per row, each with the table's header row above it
  (``"| Time after quitting | What happens |\\n| 20 minutes | Heart rate ... drop |"``); a
  table of only a header gives the header; ``|---|`` rule rows are dropped;
- a **list item** (``-``, ``*``, ``+``, ``•``, ``1.``, ``1)``) is one unit, marker kept, with any
  lines wrapped under it;
- **prose** is split into sentences (``sentences.split_sentences``).

So a sentence never absorbs the block after it, and a unit is found in its passage as written
(a table row's own line, ``anchor``). The same split serves ingest (the sentence vectors
stored per unit), the extractive generator, the citation check (a passage's units, and a
draft's own sentences) and the quotes shown with a citation; ``join`` writes units back as
text, a table's rows under one header.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from functools import lru_cache

from citewise.ingest.markdown import is_list_item
from citewise.sentences import TEXT_CACHE, split_sentences

_RULE = re.compile(r"\|?\s*:?-{2,}:?\s*(?:\|\s*:?-{2,}:?\s*)*\|?")


def is_table(unit: str) -> bool:
    return unit.lstrip().startswith("|")


def is_item(unit: str) -> bool:
    return is_list_item(unit)


def _kind(line: str) -> str:
    return "table" if is_table(line) else "item" if is_list_item(line) else "prose"


def _blocks(text: str) -> Iterator[tuple[str, list[str]]]:
    """(kind, lines) of each block: "table", "item" (one list item) or "prose"."""
    kind = ""
    lines: list[str] = []
    for raw in text.splitlines():
        line = raw.strip()
        if not line:
            if lines:
                yield kind, lines
            kind, lines = "", []
            continue
        mine = _kind(line)
        # a wrapped line continues its list item; anything else of another kind, or a new
        # item, starts a block
        joins = lines and (mine == kind != "item" or (kind == "item" and mine == "prose"))
        if not joins:
            if lines:
                yield kind, lines
            kind, lines = mine, []
        lines.append(line)
    if lines:
        yield kind, lines


def table_rows(lines: Sequence[str]) -> list[str]:
    """Each row under the header (rule rows dropped); the header alone if it has no rows."""
    rows = [" ".join(line.split()) for line in lines if not _RULE.fullmatch(line.strip())]
    if len(rows) <= 1:
        return rows
    return [f"{rows[0]}\n{row}" for row in rows[1:]]


def split_units(text: str) -> list[str]:
    """The citable units of ``text`` in reading order (see the module's docstring)."""
    return list(_split_units(text))


@lru_cache(maxsize=TEXT_CACHE)
def _split_units(text: str) -> tuple[str, ...]:
    """Remembered per text: each question splits its context's chunks several times (the
    gate's sentence signals, the stored sentence vectors' look-up, the extractive generator,
    the citation check), and the chunks of one collection come back question after question."""
    out: list[str] = []
    for kind, lines in _blocks(text):
        if kind == "table":
            out += table_rows(lines)
        elif kind == "item":
            out.append(" ".join(" ".join(lines).split()))
        else:
            out += split_sentences("\n".join(lines))
    return tuple(out)


def anchor(unit: str) -> str:
    """The part of ``unit`` written as one piece in its passage: a table row's own line (its
    header is further up), else the unit."""
    return unit.rsplit("\n", 1)[-1] if is_table(unit) else unit


def cells(line: str) -> list[str]:
    """The cells of one table line (``| a | b |`` -> ``["a", "b"]``)."""
    body = line.strip()
    body = body[1:] if body.startswith("|") else body
    body = body[:-1] if body.endswith("|") else body
    return [c.strip() for c in body.split("|")]


def join(units: Sequence[str], sources: Sequence[object] | None = None) -> str:
    """Units written back as text: sentences run on, each list item starts a line, a table is
    a block of its own, and rows of one table (the same header) that follow each other share
    one header. With ``sources`` (one per unit: the passage it came from), a list or a table
    never runs on into the next source's."""
    out, previous, header, source = "", "", "", None
    for i, unit in enumerate(units):
        unit = unit.strip()
        if not unit:
            continue
        mine = sources[i] if sources is not None else None
        switched, source = mine != source, mine
        kind = "table" if is_table(unit) else "item" if is_item(unit) else "prose"
        if kind == "table":
            head, _, row = unit.partition("\n")
            if previous == "table" and head == header and row and not switched:
                out += "\n" + row  # the next row of the same table
                continue
            header = head
        if not out:
            sep = ""
        elif "table" in (kind, previous) or (previous == "item" and (kind == "prose" or switched)):
            sep = "\n\n"
        elif kind == "item":
            sep = "\n"
        else:
            sep = " "
        out += sep + unit
        previous = kind
    return out
