"""Loading files into documents: a title plus sections (heading path, paragraphs).

``load(path, root)`` reads one file; ``walk(paths)`` yields documents and skips for every file
under the given paths, so a caller can report bad files one line each and carry on. A BEIR
``corpus.jsonl`` yields one document per line, its id the ``_id``. The readers of each file
type, and the limits they keep, are in ``loaders.py``; ``load`` is the one place where what a
parsing library raises on a malformed file becomes a ``DocumentError``.

Text reaches a store clean: a file we decode ourselves (Markdown, text, HTML) with a NUL byte
is refused as binary, as it always was; NUL characters and lone surrogates that a parser or a
JSON escape produced (PDF text, a BEIR line) are dropped, as they are artefacts of extraction
that no reader sees and that PostgreSQL and MySQL refuse to store.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from citewise.errors import DocumentError, UnsupportedTypeError
from citewise.ingest.loaders import MAX_FILE_BYTES, READERS, Reader, parser_errors
from citewise.ingest.markdown import is_list_item, parse_markdown
from citewise.records import Document, Section
from citewise.storable import bidi_control, name_form, without_unstorable

__all__ = [
    "LOADERS", "MAX_FILE_BYTES", "Skipped", "beir_line", "document", "is_beir_corpus", "is_list_item",
    "load", "load_beir", "parse_markdown", "read_file", "sources", "walk",
]

LOADERS: dict[str, Reader] = {suffix: reader for suffix, (_, reader) in READERS.items()}
MAX_HEADING_CHARS = 500


@dataclass(frozen=True)
class Skipped:
    """A file that was not loaded, and why."""

    path: str
    reason: str


def clean(text: str) -> str:
    """``text`` without NUL characters and lone surrogates (no store keeps them)."""
    return without_unstorable(text)


def _label(text: str) -> str:
    """A title or heading, cleaned and cut to ``MAX_HEADING_CHARS`` (it is embedded with
    every chunk of its section)."""
    text = clean(text)
    return text if len(text) <= MAX_HEADING_CHARS else text[: MAX_HEADING_CHARS - 1].rstrip() + "…"


def _cleaned(title: str, sections: list[Section]) -> tuple[str, list[Section]]:
    out = []
    for s in sections:
        paras = tuple(c for p in s.paragraphs if (c := clean(p)) or not p)  # drop emptied ones
        if paras:
            out.append(Section(tuple(map(_label, s.heading)), paras, s.kind))
    return _label(title), out


def document(doc_id: str, title: str, sections: list[Section], source: str) -> Document:
    """A document from a reader's title and sections, cleaned (``clean``); a
    ``DocumentError`` when no text is left."""
    title, sections = _cleaned(title, sections)
    if not sections:
        if source.lower().endswith(".pdf"):
            raise DocumentError("no text found (a scanned PDF needs OCR first)", doc_id)
        raise DocumentError("no text found: nothing but headings or markup", doc_id)
    return Document(doc_id, title, tuple(sections), source)


def _reason(e: BaseException) -> str:
    message = " ".join(str(e).split())[:200]
    return f"{type(e).__name__}: {message}" if message else type(e).__name__


def load(path: Path, root: Path | None = None) -> Document:
    """Load one file; its id is its path relative to ``root`` (or its name), in the names'
    Unicode form (``storable.name_form``). Any failure is a ``DocumentError`` naming the file by
    that id, never by ``path``; a name holding a bidirectional control character is one."""
    doc_id = name_form(path.relative_to(root).as_posix() if root else path.name)
    if bad := bidi_control(doc_id):
        raise DocumentError(f"the file name holds {bad}; rename the file", doc_id)
    entry = READERS.get(path.suffix.lower())
    if entry is None:
        raise UnsupportedTypeError(
            f"unsupported file type {path.suffix or '(none)'}; "
            f"supported: {', '.join(sorted(READERS))}, and BEIR corpus.jsonl", doc_id
        )
    kind, reader = entry
    try:
        size = path.stat().st_size
        if size == 0:
            raise DocumentError("empty file")
        if size > MAX_FILE_BYTES:
            raise DocumentError(f"{size:,} bytes is over the {MAX_FILE_BYTES:,}-byte limit")
        title, sections = reader(path.read_bytes(), path.stem)
    except DocumentError as e:
        raise type(e)(e.reason, doc_id) from None  # its kind kept, named by its id
    except PermissionError:
        raise DocumentError("permission denied; check the file's read rights", doc_id) from None
    except OSError as e:
        raise DocumentError(f"cannot be read ({e.strerror or type(e).__name__})", doc_id) from None
    except parser_errors() as e:
        raise DocumentError(
            f"not a readable {kind} file ({_reason(e)}); re-save it or convert it to text", doc_id
        ) from None
    return document(doc_id, title, sections, str(path))


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
        doc_id, text = clean(str(row["_id"])), clean(row.get("text") or "").strip()
        title = _label(row.get("title") or "").strip()
    except (json.JSONDecodeError, KeyError, TypeError, AttributeError) as e:
        return Skipped(f"{path}:{number}", f"not a BEIR corpus line ({e})")
    if not text and not title:
        return Skipped(f"{path}:{number}", f"document {doc_id} is empty")
    return Document(doc_id, title, (Section((), (text or title,)),), f"{path}#{doc_id}")


def is_beir_corpus(path: Path) -> bool:
    return path.is_file() and path.name.endswith(".jsonl") and path.stem.startswith("corpus")


def _folder(folder: Path) -> list[Path | Skipped]:
    """The files under ``folder``, sorted, hidden ones left out. A link (to a file or a
    folder) is followed only when it resolves inside ``folder``; one that leads out of it,
    or back up into a folder being read, is a ``Skipped``. Only regular files are listed."""
    top = folder.resolve()
    found: list[Path | Skipped] = []
    pending: list[tuple[Path, tuple[Path, ...]]] = [(folder, (top,))]
    while pending:
        here, chain = pending.pop()
        try:
            entries = list(os.scandir(here))
        except OSError as e:
            found.append(Skipped(str(here), f"cannot be read ({e.strerror})"))
            continue
        for entry in entries:
            path = Path(entry.path)
            if entry.name.startswith("."):
                continue
            if entry.is_symlink():
                real = path.resolve()
                if not real.is_relative_to(top):
                    found.append(Skipped(str(path), "a link to outside the folder; not followed"))
                elif real.is_dir() and real in chain:
                    found.append(Skipped(str(path), "a link back to a folder above it; not followed"))
                elif real.is_dir():
                    pending.append((path, (*chain, real)))
                elif real.is_file():
                    found.append(path)
            elif entry.is_dir(follow_symlinks=False):
                pending.append((path, (*chain, path.resolve())))
            elif entry.is_file(follow_symlinks=False):
                found.append(path)
    return sorted(found, key=lambda f: f if isinstance(f, Path) else Path(f.path))


def sources(paths: list[Path]) -> Iterator[tuple[Path, Path] | Skipped]:
    """The files ``walk`` reads, as ``(file, root)`` (a BEIR corpus as ``(corpus, corpus)``),
    and a ``Skipped`` for each path that does not exist or link that leads out of its folder."""
    for given in paths:
        if not given.exists():
            yield Skipped(str(given), "no such file or folder")
        elif is_beir_corpus(given):
            yield given, given
        elif given.is_file():
            yield given, given.parent
        else:
            for file in _folder(given):
                yield file if isinstance(file, Skipped) else (file, given)


def read_file(file: Path, root: Path) -> Document | Skipped:
    try:
        return load(file, root)
    except DocumentError as e:
        return Skipped(str(file), e.reason)


def walk(paths: list[Path]) -> Iterator[Document | Skipped]:
    """Every document under ``paths`` (files or folders), and a ``Skipped`` for each bad file."""
    for item in sources(paths):
        if isinstance(item, Skipped):
            yield item
        elif item[0] == item[1]:
            yield from load_beir(item[0])
        else:
            yield read_file(*item)


def read_all(paths: Iterable[Path] | Iterable[Document | Skipped]) -> Iterator[Document | Skipped]:
    """The documents under the paths given (files or folders), or the documents given, read as
    they come (a crawl fetches them one by one)."""
    items: Iterator[Path | Document | Skipped] = iter(paths)
    first = next(items, None)
    if first is None:
        return iter(())
    if isinstance(first, Path):
        rest = list(items)
        on_disk = [i for i in rest if isinstance(i, Path)]
        if len(on_disk) < len(rest):
            raise TypeError("ingest takes paths or documents, not a mix of both")
        return walk([first, *on_disk])
    return _given(first, items)


def _given(first: Document | Skipped, items: Iterator[Path | Document | Skipped]
           ) -> Iterator[Document | Skipped]:
    yield first
    for item in items:
        if isinstance(item, Path):
            raise TypeError("ingest takes paths or documents, not a mix of both")
        yield item
