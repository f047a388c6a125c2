"""PDF files into sections, read with pypdf (BSD licence, already the PDF reader here).

pypdf reports each run of text with where it is drawn, its font and size
(``extract_text(visitor_text=...)``); ``pdf_layout`` turns those into Markdown, headings
and all, which the Markdown reader makes sections of, so a PDF's sections look like a
Markdown file's. A PDF whose text has no heading anyone could find keeps one section a page.

The outline is read to ``MAX_OUTLINE_ENTRIES`` entries (``loaders.read_pdf`` sets pypdf's
limits on the rest).
"""

from __future__ import annotations

import contextlib
from typing import Any

from citewise.ingest import pdf_layout
from citewise.ingest.markdown import parse_markdown
from citewise.records import Section, SectionKind

MAX_OUTLINE_ENTRIES = 2_000
_BOLD = ("bold", "black", "heavy", "semibold", "demi")


def _is_bold(font: Any) -> bool:
    if not font:
        return False
    name = str(font.get("/BaseFont", "")).casefold()
    if any(w in name for w in _BOLD):
        return True
    with contextlib.suppress(Exception):
        weight = font["/FontDescriptor"].get_object().get("/FontWeight")
        return weight is not None and float(weight) >= 600
    return False


def page_runs(page: Any) -> tuple[str, list[pdf_layout.Run]]:
    runs: list[pdf_layout.Run] = []

    def visit(text: str, cm: list[float], tm: list[float], font: Any, size: float) -> None:
        if not text.strip():
            return
        a, b = tm[0] * cm[0] + tm[1] * cm[2], tm[0] * cm[1] + tm[1] * cm[3]
        c, d = tm[2] * cm[0] + tm[3] * cm[2], tm[2] * cm[1] + tm[3] * cm[3]
        x = tm[4] * cm[0] + tm[5] * cm[2] + cm[4]
        y = tm[4] * cm[1] + tm[5] * cm[3] + cm[5]
        scale = abs(a * d - b * c) ** 0.5 or 1.0
        runs.append(pdf_layout.Run(text, x, y, float(size or 0) * scale, _is_bold(font)))

    text = page.extract_text(visitor_text=visit) or ""
    return text, runs


def _outline(reader: Any) -> list[pdf_layout.OutlineEntry]:
    entries: list[pdf_layout.OutlineEntry] = []

    def walk(items: list[Any], depth: int) -> None:
        for item in items:
            if len(entries) >= MAX_OUTLINE_ENTRIES or depth > 6:
                return
            if isinstance(item, list):
                walk(item, depth + 1)
                continue
            page = None
            with contextlib.suppress(Exception):
                page = reader.get_destination_page_number(item)
            entries.append(pdf_layout.OutlineEntry(str(item.title or ""), page, depth))

    with contextlib.suppress(Exception):  # a broken outline is no outline: the fonts still tell
        walk(list(reader.outline), 0)
    return entries


def sections(pages: list[tuple[str, list[Any]]], reader: Any, name: str) -> tuple[str, list[Section]]:
    """The title and sections of a read PDF: ``pages`` is each page's ``(text, runs)``."""
    meta_title = str((reader.metadata.title if reader.metadata else None) or "").strip()
    laid = [pdf_layout.lines(runs, number) for number, (_, runs) in enumerate(pages)]
    title, found = parse_markdown(pdf_layout.markdown(laid, _outline(reader), meta_title, name), name)
    if any(s.heading for s in found):
        return title, found
    by_page = []  # no heading anyone could find: a section a page
    for number, lines in enumerate(pdf_layout.drop_repeated(laid), 1):
        _, page = parse_markdown(pdf_layout.markdown([lines], [], title, name), name)
        paras = tuple(p for s in page for p in s.paragraphs)
        if paras:
            kind: SectionKind = "table" if any(s.kind == "table" for s in page) else "text"
            by_page.append(Section((f"Page {number}",), paras, kind))
    return title, by_page
