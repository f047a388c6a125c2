"""One reader per file type: the file's bytes in, ``(title, sections)`` out.

Each reader costs time and memory in proportion to the file, whatever is in it: a reader
raises ``DocumentError`` (a reason, without the file's name: ``documents.load`` adds its id)
when a file would cost more than its size says:

- DOCX: member sizes are read from the zip's central directory before anything is inflated;
  over ``DOCX_MAX_UNCOMPRESSED`` in all, over ``DOCX_MAX_TEXT_PARTS`` of compressible parts
  (XML), or a member over 1 MB that inflates more than ``DOCX_MAX_RATIO``-fold, is refused
  (Python's zipfile never inflates past a declared size, so the declared sizes bound it).
- PDF: pypdf's own limits, its inflated stream size lowered to ``PDF_MAX_STREAM_BYTES``.
- HTML: nested too deep, or nested blocks repeating its text too often (``html_text.py``).
- Any: more than ``MAX_TEXT_CHARS`` characters of text.

Readers are handed bytes, never a path, so no library message can name a server path.
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import re
import zipfile
from collections.abc import Callable
from typing import Any

from citewise.errors import DocumentError
from citewise.ingest import pdf
from citewise.ingest.html_text import html_markdown
from citewise.ingest.markdown import paragraphs, parse_markdown
from citewise.records import Section

MAX_FILE_BYTES = 50 * 1024 * 1024
MAX_TEXT_CHARS = 50_000_000
DOCX_MAX_UNCOMPRESSED = 64 * 1024 * 1024
DOCX_MAX_TEXT_PARTS = 16 * 1024 * 1024
COMPRESSIBLE = 3
DOCX_MAX_RATIO = 200
DOCX_RATIO_FROM = 1024 * 1024
DOCX_MAX_MEMBERS = 10_000
PDF_MAX_STREAM_BYTES = 32 * 1024 * 1024

Reader = Callable[[bytes, str], tuple[str, list[Section]]]


def _mb(n: int) -> str:
    return f"{n / 1024 / 1024:,.0f} MB"


def decode(raw: bytes) -> str:
    """UTF-8 text (a BOM allowed); a NUL byte anywhere means the file is not text."""
    if b"\x00" in raw:
        raise DocumentError("looks binary (NUL bytes); convert it to text, Markdown or PDF")
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise DocumentError(f"not UTF-8 (byte {e.start}); re-save it as UTF-8") from None
    _check_length(len(text))
    return text


def _check_length(chars: int) -> None:
    if chars > MAX_TEXT_CHARS:
        raise DocumentError(
            f"over {MAX_TEXT_CHARS:,} characters of text; split it into smaller files"
        )


def read_markdown(raw: bytes, name: str) -> tuple[str, list[Section]]:
    return parse_markdown(decode(raw), name)


def read_text(raw: bytes, name: str) -> tuple[str, list[Section]]:
    paras = paragraphs(decode(raw).splitlines())
    return name, [Section((), tuple(paras))] if paras else []


def read_html(raw: bytes, name: str) -> tuple[str, list[Section]]:
    from bs4 import BeautifulSoup

    soup = BeautifulSoup(decode(raw), "lxml")
    for tag in soup(["script", "style", "nav", "footer", "noscript", "template"]):
        tag.decompose()
    title = soup.title.get_text(" ", strip=True) if soup.title else ""
    h1, sections = parse_markdown(html_markdown(soup.body or soup), name)
    return (title or h1), sections


def _pdf_limits() -> contextlib.AbstractContextManager[Any]:
    try:
        from pypdf import Configuration, apply_configuration
    except ImportError:  # pypdf before 7 keeps its own fixed limits (75 MB a stream)
        return contextlib.nullcontext()
    names = {f.name for f in dataclasses.fields(Configuration)}
    limits = {n: PDF_MAX_STREAM_BYTES for n in names if n.endswith("maximum_output_length")}
    return apply_configuration(None, **limits)


def read_pdf(raw: bytes, name: str) -> tuple[str, list[Section]]:
    from pypdf import PdfReader, errors

    limit_reached = getattr(errors, "LimitReachedError", ())  # pypdf 6 and later
    try:
        with _pdf_limits():
            reader = PdfReader(io.BytesIO(raw))
            pages: list[tuple[str, list[Any]]] = []
            chars = 0
            for page in reader.pages:
                pages.append(pdf.page_runs(page))
                chars += len(pages[-1][0])
                _check_length(chars)
            return pdf.sections(pages, reader, name)
    except limit_reached as e:
        raise DocumentError(
            f"over a PDF reading limit (a stream inflates past {_mb(PDF_MAX_STREAM_BYTES)}, or too "
            f"many objects: {e}); re-export it or convert it to text"
        ) from None


def check_zip(raw: bytes) -> None:
    """Refuse a zip whose members, as its central directory declares them, inflate too far.

    Parsed XML takes up to 20 times its size in memory when its elements are small, and such
    XML compresses well: members that inflate ``COMPRESSIBLE``-fold or more (text, XML) may
    hold ``DOCX_MAX_TEXT_PARTS`` in all; images, which barely compress, count only towards
    ``DOCX_MAX_UNCOMPRESSED``."""
    with zipfile.ZipFile(io.BytesIO(raw)) as z:
        members = z.infolist()
    if len(members) > DOCX_MAX_MEMBERS:
        raise DocumentError(f"{len(members):,} parts in the DOCX zip; the limit is {DOCX_MAX_MEMBERS:,}")
    text = 0
    for m in members:
        ratio = m.file_size / max(m.compress_size, 1)
        if m.file_size > DOCX_RATIO_FROM and ratio > DOCX_MAX_RATIO:
            raise DocumentError(
                f"part {m.filename} would inflate {ratio:,.0f}-fold (the limit is "
                f"{DOCX_MAX_RATIO}-fold): a zip bomb, not a document"
            )
        text += m.file_size if ratio >= COMPRESSIBLE else 0
    total = sum(m.file_size for m in members)
    for size, limit, what in ((total, DOCX_MAX_UNCOMPRESSED, "inflates"),
                              (text, DOCX_MAX_TEXT_PARTS, "its text and XML parts inflate")):
        if size > limit:
            raise DocumentError(
                f"{what} to {_mb(size)}, over the {_mb(limit)} limit; split it or save it as PDF"
            )


_DOCX_HEADING = re.compile(r"heading (\d)")


def read_docx(raw: bytes, name: str) -> tuple[str, list[Section]]:
    import docx

    check_zip(raw)
    d = docx.Document(io.BytesIO(raw))
    md, chars = [], 0
    for p in d.paragraphs:
        style = (p.style.name or "").lower() if p.style is not None else ""
        m = _DOCX_HEADING.match(style)
        text = p.text
        chars += len(text)
        if style == "title":
            md.append(f"# {text}")
        elif m:
            md.append(f"{'#' * (int(m.group(1)) + 1)} {text}")
        else:
            md.append(text + "\n")
    _check_length(chars)
    return parse_markdown("\n".join(md), name)


READERS: dict[str, tuple[str, Reader]] = {
    ".md": ("Markdown", read_markdown),
    ".markdown": ("Markdown", read_markdown),
    ".txt": ("text", read_text),
    ".text": ("text", read_text),
    ".html": ("HTML", read_html),
    ".htm": ("HTML", read_html),
    ".pdf": ("PDF", read_pdf),
    ".docx": ("DOCX", read_docx),
}


def parser_errors() -> tuple[type[BaseException], ...]:
    """What the parsing libraries raise on a malformed file (their own error classes, and the
    built-in ones they let through), for ``documents.load`` to turn into ``DocumentError``."""
    import struct
    import zlib

    from docx.exceptions import PythonDocxError
    from docx.opc.exceptions import OpcError
    from lxml.etree import LxmlError
    from pypdf.errors import PyPdfError

    errors: list[type[BaseException]] = [
        PyPdfError, LxmlError, OpcError, PythonDocxError, zipfile.BadZipFile,
        zipfile.LargeZipFile, zlib.error, struct.error, ValueError, KeyError, IndexError,
        TypeError, AttributeError, AssertionError, EOFError, RecursionError, ArithmeticError,
        NotImplementedError,
    ]
    with contextlib.suppress(ImportError):
        from bs4.builder import ParserRejectedMarkup

        errors.append(ParserRejectedMarkup)
    return tuple(errors)
