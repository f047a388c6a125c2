"""Loading files into documents: a title plus sections (heading path, paragraphs).

``load(path, root)`` reads one file; ``walk(paths)`` yields documents and skips for every file
under the given paths, so a caller can report bad files one line each and carry on. A BEIR
``corpus.jsonl`` yields one document per line, its id the ``_id``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from .errors import DocumentError
from .records import Document, Section, SectionKind

MAX_FILE_BYTES = 50 * 1024 * 1024


@dataclass(frozen=True)
class Skipped:
    """A file that was not loaded, and why."""

    path: str
    reason: str


def _decode(raw: bytes, path: Path) -> str:
    if b"\x00" in raw[:8192]:
        raise DocumentError(f"{path}: looks binary (NUL bytes); convert it to text, Markdown or PDF")
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise DocumentError(
            f"{path}: not UTF-8 (byte {e.start}); re-save it as UTF-8"
        ) from None


_ITEM = re.compile(r"^([-*+•]|\d+[.)])\s+")


def is_list_item(text: str) -> bool:
    return bool(_ITEM.match(text.lstrip()))


def _paragraphs(lines: list[str]) -> list[str]:
    """Join wrapped lines into paragraphs. Blank lines separate paragraphs; the items of one
    list stay in one paragraph, one item a line; a list after prose starts a paragraph."""
    paras: list[str] = []
    buf = ""
    in_list = False
    for line in lines:
        stripped = line.strip()
        if not stripped:
            if buf:
                paras.append(buf)
            buf, in_list = "", False
            continue
        if is_list_item(stripped):
            if buf and not in_list:
                paras.append(buf)
                buf = ""
            buf = f"{buf}\n{stripped}" if buf else stripped
            in_list = True
        else:
            buf = f"{buf} {stripped}" if buf else stripped
    if buf:
        paras.append(buf)
    return paras


_FAQ_HEADING = re.compile(r"\b(faq|frequently asked|questions?|q\s*&\s*a)\b", re.I)
_STRUCTURED_HEADING = re.compile(r"\b(pricing|prices?|specs?|specifications?|faq)\b", re.I)


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
            p for p in _paragraphs([ln for ln in lines if not ln.strip().startswith("|")]) if p
        ]
        if table_rows:
            rows = [r for r in table_rows if not re.fullmatch(r"\|[\s:|-]+\|?", r)]
            paras.append("\n".join(rows))
        if paras:
            sections.append(Section(heading, tuple(paras), _kind(heading, lines)))
        lines.clear()

    for line in text.splitlines():
        if line.strip().startswith("```"):
            in_fence = not in_fence
            continue
        m = None if in_fence else re.match(r"^(#{1,6})\s+(.+?)\s*#*\s*$", line)
        if not m:
            lines.append(line)
            continue
        flush()
        level, heading = len(m.group(1)), m.group(2).strip()
        if level == 1 and not title:
            title = heading
            path = []
            continue
        depth = max(level - 1, 1) if title else level
        path = path[: depth - 1] + [heading]
    flush()
    return title or fallback_title, sections


def _load_markdown(path: Path) -> tuple[str, list[Section]]:
    return parse_markdown(_decode(path.read_bytes(), path), path.stem)


def _load_text(path: Path) -> tuple[str, list[Section]]:
    paras = _paragraphs(_decode(path.read_bytes(), path).splitlines())
    return path.stem, [Section((), tuple(paras))] if paras else []


def _load_html(path: Path) -> tuple[str, list[Section]]:
    from bs4 import BeautifulSoup

    soup = BeautifulSoup(_decode(path.read_bytes(), path), "lxml")
    for tag in soup(["script", "style", "nav", "footer", "noscript", "template"]):
        tag.decompose()
    title = soup.title.get_text(" ", strip=True) if soup.title else ""
    md: list[str] = []
    body = soup.body or soup
    for el in body.find_all(["h1", "h2", "h3", "h4", "h5", "h6", "p", "li", "tr", "pre"]):
        text = " ".join(el.get_text(" ", strip=True).split())
        if not text:
            continue
        if el.name[0] == "h":
            md.append(f"\n{'#' * int(el.name[1])} {text}\n")
        elif el.name == "tr":
            cells = [c.get_text(" ", strip=True) for c in el.find_all(["td", "th"])]
            md.append("| " + " | ".join(cells) + " |")
        elif el.name == "li" and el.find_parent("li") is None:
            md.append(f"\n- {text}\n")
        elif el.name in ("p", "pre"):
            md.append(f"\n{text}\n")
    h1, sections = parse_markdown("\n".join(md), path.stem)
    return (title or h1), sections


def _load_pdf(path: Path) -> tuple[str, list[Section]]:
    from pypdf import PdfReader
    from pypdf.errors import PdfReadError

    try:
        reader = PdfReader(str(path))
        pages = [page.extract_text() or "" for page in reader.pages]
        meta_title = (reader.metadata.title if reader.metadata else None) or ""
    except (PdfReadError, ValueError, KeyError, OSError) as e:
        raise DocumentError(f"{path}: not a readable PDF ({e}); re-export it or convert to text") from None
    sections = []
    for number, page in enumerate(pages, 1):
        paras = _paragraphs(page.splitlines())
        if paras:
            sections.append(Section((f"Page {number}",), tuple(paras)))
    return meta_title.strip() or path.stem, sections


def _load_docx(path: Path) -> tuple[str, list[Section]]:
    import docx
    from docx.opc.exceptions import PackageNotFoundError

    try:
        d = docx.Document(str(path))
    except (PackageNotFoundError, ValueError, KeyError, OSError) as e:
        raise DocumentError(f"{path}: not a readable DOCX file ({e})") from None
    md = []
    for p in d.paragraphs:
        style = (p.style.name or "").lower() if p.style is not None else ""
        m = re.match(r"heading (\d)", style)
        if style == "title":
            md.append(f"# {p.text}")
        elif m:
            md.append(f"{'#' * (int(m.group(1)) + 1)} {p.text}")
        else:
            md.append(p.text + "\n")
    return parse_markdown("\n".join(md), path.stem)


LOADERS: dict[str, Callable[[Path], tuple[str, list[Section]]]] = {
    ".md": _load_markdown,
    ".markdown": _load_markdown,
    ".txt": _load_text,
    ".text": _load_text,
    ".html": _load_html,
    ".htm": _load_html,
    ".pdf": _load_pdf,
    ".docx": _load_docx,
}


def load(path: Path, root: Path | None = None) -> Document:
    """Load one file; its id is its path relative to ``root`` (or its name)."""
    loader = LOADERS.get(path.suffix.lower())
    if loader is None:
        raise DocumentError(
            f"{path}: unsupported file type {path.suffix or '(none)'}; "
            f"supported: {', '.join(sorted(LOADERS))}, and BEIR corpus.jsonl"
        )
    try:
        size = path.stat().st_size
    except OSError as e:
        raise DocumentError(f"{path}: cannot be read ({e.strerror})") from None
    if size == 0:
        raise DocumentError(f"{path}: empty file")
    if size > MAX_FILE_BYTES:
        raise DocumentError(f"{path}: {size:,} bytes is over the {MAX_FILE_BYTES:,}-byte limit")
    try:
        title, sections = loader(path)
    except PermissionError:
        raise DocumentError(f"{path}: permission denied; check the file's read rights") from None
    if not sections:
        raise DocumentError(f"{path}: no text found (a scanned PDF needs OCR first)")
    doc_id = path.relative_to(root).as_posix() if root else path.name
    return Document(doc_id, title, tuple(sections), str(path))


def load_beir(path: Path) -> Iterator[Document | Skipped]:
    """A BEIR ``corpus.jsonl``: one ``{"_id", "title", "text"}`` object per line."""
    with path.open(encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            if line.strip():
                yield beir_line(path, number, line)


def beir_line(path: Path, number: int, line: str) -> Document | Skipped:
    """One non-blank line of a BEIR corpus (``number`` counts from 1, for messages)."""
    try:
        row = json.loads(line)
        doc_id, text = str(row["_id"]), (row.get("text") or "").strip()
    except (json.JSONDecodeError, KeyError, TypeError) as e:
        return Skipped(f"{path}:{number}", f"not a BEIR corpus line ({e})")
    title = (row.get("title") or "").strip()
    if not text and not title:
        return Skipped(f"{path}:{number}", f"document {doc_id} is empty")
    return Document(doc_id, title, (Section((), (text or title,)),), f"{path}#{doc_id}")


def is_beir_corpus(path: Path) -> bool:
    return path.is_file() and path.name.endswith(".jsonl") and path.stem.startswith("corpus")


def sources(paths: list[Path]) -> Iterator[tuple[Path, Path] | Skipped]:
    """The files ``walk`` reads, as ``(file, root)`` (a BEIR corpus as ``(corpus, corpus)``),
    and a ``Skipped`` for each path that does not exist."""
    for given in paths:
        if not given.exists():
            yield Skipped(str(given), "no such file or folder")
            continue
        if is_beir_corpus(given):
            yield given, given
            continue
        if given.is_file():
            files, root = [given], given.parent
        else:
            files = sorted(p for p in given.rglob("*") if p.is_file())
            root = given
        for file in files:
            if not any(part.startswith(".") for part in file.relative_to(root).parts):
                yield file, root


def read_file(file: Path, root: Path) -> Document | Skipped:
    try:
        return load(file, root)
    except DocumentError as e:
        return Skipped(str(file), str(e).removeprefix(f"{file}: "))


def walk(paths: list[Path]) -> Iterator[Document | Skipped]:
    """Every document under ``paths`` (files or folders), and a ``Skipped`` for each bad file."""
    for item in sources(paths):
        if isinstance(item, Skipped):
            yield item
        elif item[0] == item[1]:
            yield from load_beir(item[0])
        else:
            yield read_file(*item)
