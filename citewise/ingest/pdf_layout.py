"""Text placed on PDF pages into Markdown: headings, paragraphs and table rows.

A PDF holds no paragraphs or headings, only runs of text drawn at a place, in a font, at a
size. This module rebuilds the structure a reader sees:

- **Lines**: runs in drawing order on one baseline; a run far (``CELL_GAP`` ems) right of
  the one before starts a new cell of the line.
- **Headings**: the PDF's outline (bookmarks) when its entries are found among the lines;
  otherwise short lines set larger than the body text (``HEADING_RATIO``), or wholly bold
  at body size, ranked by size. A line that looks like a heading but is not one (the outline
  left it out) still ends the paragraph before it: a heading never joins a sentence.
- **Paragraphs**: a gap between lines wider than ``PARAGRAPH_GAP`` times the usual line
  spacing, a change of size, or a list bullet ends one; a word hyphenated at a line end is
  joined again.
- **Tables**: two or more consecutive lines of two or more cells become ``|`` rows.
- Lines repeated on most pages of a long document (running headers, page numbers) go.

Everything is linear in the number of runs, but for sorting.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

CELL_GAP = 2.0
HEADING_RATIO = 1.12
PARAGRAPH_GAP = 1.5
HEADING_MAX_WORDS = 16
REPEATED_SHARE = 0.6
_CHAR_WIDTH = 0.5  # ems a character takes on average; pypdf reports where a run starts only


@dataclass(frozen=True)
class Run:
    """Text drawn in one go: where it starts (points, y up), its size and weight."""

    text: str
    x: float
    y: float
    size: float
    bold: bool


@dataclass(frozen=True)
class Line:
    cells: tuple[str, ...]
    x: float
    y: float
    size: float
    bold: bool
    page: int

    @property
    def text(self) -> str:
        return " ".join(self.cells)


@dataclass(frozen=True)
class OutlineEntry:
    title: str
    page: int | None
    depth: int


def lines(runs: Iterable[Run], page: int) -> list[Line]:
    """Runs in drawing order into lines: a new line where the baseline moves by more than
    half the text's size, or the text goes back left."""
    out: list[Line] = []
    cells: list[list[str]] = []
    parts: list[Run] = []
    end = 0.0

    def flush() -> None:
        if parts:
            chars = Counter[tuple[float, bool]]()
            for r in parts:
                chars[(round(r.size * 2) / 2, r.bold)] += len(r.text.strip())
            (size, _), _ = chars.most_common(1)[0]
            bold = all(r.bold for r in parts if r.text.strip())
            texts = [c for c in (" ".join("".join(c).split()) for c in cells) if c]
            if texts:
                out.append(Line(tuple(texts), parts[0].x, parts[0].y, size, bold, page))
        cells.clear()
        parts.clear()

    for run in runs:
        if not run.text.strip():
            continue
        size = max(run.size, 1.0)
        last = parts[-1] if parts else None
        if last is None or abs(run.y - last.y) > size / 2 or run.x < last.x - size:
            flush()
            cells.append([run.text])
        elif run.x - end > CELL_GAP * size:
            cells.append([run.text])
        else:
            cells[-1].append(run.text)
        parts.append(run)
        end = run.x + len(run.text) * size * _CHAR_WIDTH
    flush()
    return out


def _norm(text: str) -> str:
    return " ".join(re.sub(r"[^\w\s]", " ", text.casefold()).split())


def drop_repeated(pages: Sequence[list[Line]]) -> list[list[Line]]:
    """Lines (digits aside) at the top or foot of most pages of a document of three or more,
    but for the first if it is set larger than the text: running headers and footers, page
    numbers."""
    if len(pages) < 3:
        return [list(p) for p in pages]
    body = _body_size([ln for p in pages for ln in p])
    edges = [sorted(p, key=lambda ln: ln.y)[:2] + sorted(p, key=lambda ln: -ln.y)[:2] for p in pages]
    key = {id(ln): re.sub(r"\d+", "#", _norm(ln.text)) for p in edges for ln in p}
    seen = Counter(k for p in edges for k in {key[id(ln)] for ln in p})
    common = {k for k, n in seen.items() if n >= REPEATED_SHARE * len(pages)}
    kept: set[str] = set()  # the first of a running header set large may be the title

    def keep(ln: Line) -> bool:
        k = key.get(id(ln))
        if k not in common:
            return True
        if k in kept or ln.size <= body or not any(c.isalpha() for c in k):
            return False
        kept.add(k)
        return True

    return [[ln for ln in p if keep(ln)] for p in pages]


def _body_size(all_lines: Sequence[Line]) -> float:
    chars = Counter[float]()
    for ln in all_lines:
        chars[ln.size] += len(ln.text)
    return chars.most_common(1)[0][0] if chars else 0.0


def _looks_heading(ln: Line, body: float) -> bool:
    text = ln.text
    if len(ln.cells) > 1 or len(text.split()) > HEADING_MAX_WORDS or not any(c.isalpha() for c in text):
        return False
    if text.rstrip().endswith((".", ",", ";")) and not ln.size >= body * 1.5:
        return False
    return ln.size >= body * HEADING_RATIO or (ln.bold and ln.size >= body * 0.95)


def _font_levels(all_lines: Sequence[Line], body: float) -> dict[tuple[float, bool], int]:
    """Heading styles, largest first, to levels 1, 2, ..."""
    styles = sorted({(ln.size, ln.bold) for ln in all_lines if _looks_heading(ln, body)},
                    key=lambda s: (-s[0], not s[1]))
    return {s: i + 1 for i, s in enumerate(styles[:5])}


def _font_title(first_page: Sequence[Line], body: float) -> Line | None:
    """The first page's one line set largest, well over the body text, above any body text
    (``markdown`` takes it for the title when no other line has its style)."""
    if not first_page:
        return None
    top = max(ln.size for ln in first_page)
    before = next(i for i, ln in enumerate(first_page) if ln.size == top)
    if sum(ln.size == body for ln in first_page[:before]) > 3:
        return None
    largest = [ln for ln in first_page if ln.size == top]
    if len(largest) == 1 and top >= body * 1.3 and _looks_heading(largest[0], body):
        return largest[0]
    return None


def _outline_marks(pages: Sequence[list[Line]], outline: Sequence[OutlineEntry]) -> dict[int, int]:
    """``id(line) -> depth`` (``WRAPPED`` for a title's second line) for each outline entry
    found as a line of its page (any page if its page is unknown): the title itself, perhaps
    numbered ("2.1 Dosing" for "Dosing"), or wrapped onto the next line. A few dictionary
    look-ups a line, whatever the outline's size."""
    wanted: dict[tuple[str, int | None], list[OutlineEntry]] = {}
    for entry in reversed(outline):  # popped from the end: in the outline's order
        if title := _norm(entry.title):
            wanted.setdefault((title, entry.page), []).append(entry)
    marks: dict[int, int] = {}
    for number, page in enumerate(pages):
        for i, ln in enumerate(page):
            text = _norm(ln.text)
            wrapped = f"{text} {_norm(page[i + 1].text)}" if i + 1 < len(page) else text
            for key in (text, _unnumbered(text), wrapped, _unnumbered(wrapped)):
                entries = wanted.get((key, number)) or wanted.get((key, None))
                if entries:
                    marks[id(ln)] = entries.pop().depth
                    if key in (wrapped, _unnumbered(wrapped)) and key not in (text, _unnumbered(text)):
                        marks[id(page[i + 1])] = WRAPPED
                    break
    return marks


WRAPPED = -1
_NUMBERING = re.compile(r"(?:(?:\d{1,3}|[ivxlc]{1,5}|[a-z]) ){1,4}")


def _unnumbered(text: str) -> str:
    """Less a leading section number: "2 1 sleep" (from "2.1 Sleep") is "sleep"."""
    m = _NUMBERING.match(text)
    return text[m.end():] if m else text


def markdown(pages: Sequence[list[Line]], outline: Sequence[OutlineEntry], title: str,
             fallback: str) -> str:
    """The pages' lines as Markdown, ``# title`` first: ``title`` (the PDF's own), else the
    first page's largest line, else ``fallback``."""
    pages = drop_repeated(pages)
    all_lines = [ln for p in pages for ln in p]
    body = _body_size(all_lines)
    marks = _outline_marks(pages, outline) if outline else {}
    first = _font_title(pages[0] if pages else [], body)
    if (not title and first is not None and id(first) not in marks
            and sum((ln.size, ln.bold) == (first.size, first.bold) for ln in all_lines) == 1):
        title = first.text
        all_lines = [ln for ln in all_lines if ln is not first]
    levels = {} if marks else _font_levels(all_lines, body)
    title = title or fallback
    out = [f"# {_escape(title)}", ""]
    para: list[str] = []
    rows: list[Line] = []
    prev: Line | None = None
    item_x = math.inf  # where the current list's bullets stand
    spacing = _spacing(all_lines)

    def end_paragraph() -> None:
        nonlocal item_x
        item_x = math.inf
        if para:
            out.extend([_escape(_join(para)), ""])
            para.clear()
        if rows:
            out.extend(_table(rows))
            rows.clear()

    for ln in all_lines:
        depth = marks.get(id(ln))
        level = depth + 2 if depth is not None else None
        if not marks:
            style = levels.get((ln.size, ln.bold))
            level = style + 1 if style and _looks_heading(ln, body) else None
        if level is not None:
            wrapped = depth == WRAPPED or (not marks and _continues_heading(prev, ln))
            if wrapped and out[-2].startswith("#"):
                out[-2] = f"{out[-2]} {_escape(ln.text)}"
            else:
                end_paragraph()
                out.extend([f"{'#' * min(level, 6)} {_escape(ln.text)}", ""])
            prev = ln
            continue
        if len(ln.cells) > 1:
            if para:
                end_paragraph()
            rows.append(ln)
        else:
            bullet = _BULLET.match(ln.text) is not None
            in_list = item_x < math.inf
            left_list = in_list and not bullet and ln.x <= item_x + 1  # back at the bullets' margin
            loose = bool(marks) and _looks_heading(ln, body)  # a heading the outline left out
            if left_list or loose or rows or (prev and _breaks(prev, ln, spacing, body, in_list)):
                end_paragraph()
            if bullet:
                item_x = ln.x
            para.append(ln.text)
            if loose:  # stands alone, joined to no sentence
                end_paragraph()
        prev = ln
    end_paragraph()
    return "\n".join(out)


def _continues_heading(prev: Line | None, ln: Line) -> bool:
    """A heading wrapped onto a second line: the same style, right below."""
    return (prev is not None and prev.page == ln.page and (prev.size, prev.bold) == (ln.size, ln.bold)
            and 0 < prev.y - ln.y <= 1.6 * ln.size)


def _spacing(all_lines: Sequence[Line]) -> float:
    gaps = Counter[float]()
    for a, b in zip(all_lines, all_lines[1:], strict=False):
        if a.page == b.page and a.size == b.size and 0 < a.y - b.y < 3 * a.size:
            gaps[round(a.y - b.y)] += 1
    return gaps.most_common(1)[0][0] if gaps else 0.0


def _breaks(prev: Line, ln: Line, spacing: float, body: float, in_list: bool) -> bool:
    """Does ``ln`` start a new paragraph after ``prev``? A list's items stay in one."""
    if ln.size != prev.size or (_BULLET.match(ln.text) and not in_list):
        return True
    if prev.page != ln.page or prev.y < ln.y:  # a new page or column: the text runs on
        return False
    return prev.y - ln.y > PARAGRAPH_GAP * (spacing or 1.2 * body)


_BULLET = re.compile(r"^([-*•▪◦‣]|\d{1,3}[.)])\s")
def _join(parts: list[str]) -> str:
    """Lines into one paragraph, list items a line each, a word hyphenated at a line's end
    whole again; each line is looked at once, at its ends."""
    out = [parts[0]]
    for part in parts[1:]:
        last = out[-1]
        if _BULLET.match(part):
            out.append("\n" + part)
        elif len(last) > 1 and last[-1] == "-" and last[-2].isalpha() and part[:1].islower():
            out[-1] = last[:-1]
            out.append(part)
        else:
            out.append(" " + part)
    return "".join(out)


def _table(rows: list[Line]) -> list[str]:
    if len(rows) == 1:
        return [_escape(rows[0].text), ""]
    width = max(len(r.cells) for r in rows)
    lines = ["| " + " | ".join([c.replace("|", "/") for c in r.cells] + [""] * (width - len(r.cells)))
             + " |" for r in rows]
    return [lines[0], "|" + "---|" * width, *lines[1:], ""]


def _escape(text: str) -> str:
    """Text kept as text by the Markdown reader: no line of it a heading (a space before the
    ``#`` is enough), a fence or a table row (a backslash before the mark)."""
    stripped = text.lstrip()
    if stripped.startswith("#"):
        return " " + stripped
    if stripped.startswith(("```", "|")):
        return "\\" + stripped
    return text
