"""One uploaded file into a knowledge base: its name checked, its bytes loaded through the same
loaders as ``citewise ingest`` (in a temporary folder), its document stored, and one result.
A bad file is a ``rejected`` result with its reason and changes nothing stored. The HTTP
upload (``api/uploads.py``), the ingestion jobs (``jobs.py``) and the console's Upload page
share these, so a file gets the same result whichever way it came.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path, PurePath
from typing import TYPE_CHECKING, Any, Literal

from citewise.errors import (
    BusyError,
    CitewiseError,
    DocumentError,
    EmbedderError,
    StoreError,
    UnsupportedTypeError,
    UploadTooLargeError,
)
from citewise.ingest.documents import LOADERS, load
from citewise.kb import KnowledgeBase
from citewise.records import Document
from citewise.storable import bidi_control, name_form, unprintable

if TYPE_CHECKING:  # the engine is not needed to check or load a file
    from citewise.engine import IngestReport

log = logging.getLogger(__name__)
Status = Literal["added", "replaced", "unchanged", "rejected"]
StoreDoc = Callable[[KnowledgeBase, Document], "IngestReport"]  # the ingest of one document


@dataclass(frozen=True)
class FileResult:
    """What happened to one file; ``as_dict`` is what a job keeps and HTTP answers."""

    filename: str
    doc_id: str | None
    status: Status
    chunks: int = 0
    reason: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


Outcome = tuple[FileResult, CitewiseError | None]  # a file's result, and why it was rejected


def check_filename(raw: str | None) -> str:
    """The file's name as sent, in the names' Unicode form (``storable.name_form``), if it can
    be a document id: a plain name, no folder, no control or bidirectional control characters,
    a supported type."""
    name = name_form(raw or "")
    if not name:
        raise DocumentError("a file part has no file name")
    if bad := bidi_control(name) or ("a control character" if unprintable(name) else None):
        raise DocumentError(f"the file name holds {bad}; rename the file")
    if "/" in name or "\\" in name:
        raise DocumentError("the file name holds a folder; send the file's own name only")
    if name.startswith(".") or len(name) > 200:
        raise DocumentError("not a usable file name (a leading dot, or over 200 characters)")
    if PurePath(name).suffix.lower() not in LOADERS:
        raise UnsupportedTypeError(
            f"unsupported file type {PurePath(name).suffix or '(none)'}; "
            f"supported: {', '.join(sorted(LOADERS))}"
        )
    return name


def too_large(limit: int) -> UploadTooLargeError:
    return UploadTooLargeError(f"over the upload limit of {limit:,} bytes")


def rejected(filename: str, error: CitewiseError, folder: Path | None = None) -> Outcome:
    reason = str(error)
    if folder is not None:
        reason = reason.replace(f"{folder}{os.sep}", "").replace(str(folder), "")
    name = PurePath(filename).name if filename else ""
    reason = reason.removeprefix(f"{name}: ") if name else reason
    return FileResult(filename=filename, doc_id=None, status="rejected", reason=reason), error


def _load(path: Path, folder: Path) -> Document:
    try:
        return load(path, folder)
    except DocumentError:
        raise
    except Exception as e:  # a parser's own failure on a hostile file is that file's failure
        log.warning("loading an uploaded %s failed: %r", path.suffix, e)
        raise DocumentError(f"not a readable {path.suffix.lstrip('.').upper()} file") from None


def store_file(kb: KnowledgeBase, filename: str, name: str, data: bytes, store_doc: StoreDoc,
               busy_raises: bool = False) -> Outcome:
    """Load and store one received file (``name``, checked by ``check_filename``; ``filename``
    as its result shows it) with ``store_doc``. The store's or the embedder's failure is
    raised (the service, not the file), and with ``busy_raises`` a ``BusyError`` (no compute
    lane free: a job waits and tries again); any other failure is the file's rejection."""
    with tempfile.TemporaryDirectory(prefix="citewise-upload-") as tmp:
        folder = Path(tmp)
        path = folder / name
        path.write_bytes(data)
        try:
            doc = _load(path, folder)
        except DocumentError as e:
            return rejected(filename, e, folder)
    doc = dataclasses.replace(doc, source=f"upload:{doc.id}")
    try:
        report = store_doc(kb, doc)
    except (StoreError, EmbedderError):
        raise  # the service, not the file: a retry is safe
    except Exception as e:  # each document is stored in its own transaction: whole or not at all
        if busy_raises and isinstance(e, BusyError):
            raise
        log.warning("storing uploaded %r failed: %r", doc.id, e)
        error = e if isinstance(e, CitewiseError) else DocumentError(
            f"could not be stored ({type(e).__name__})")
        return rejected(filename, error)
    for status in ("added", "replaced", "unchanged"):
        if doc.id in getattr(report, status):
            return FileResult(filename=filename, doc_id=doc.id, status=status,
                              chunks=report.chunks), None
    return rejected(filename, DocumentError(report.skipped[0].reason if report.skipped
                                            else "not stored"))
