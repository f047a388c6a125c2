"""Uploaded files, one at a time: the name and size checks made as a file is received, and the
ingest of its bytes through the same loader and ingest path as ``citewise ingest``, in a
temporary folder. Each file gets its own result, and a bad file changes nothing stored. The
synchronous upload (``kbs.py``) and the ingestion jobs (``job_runner.py``) both use these.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import tempfile
from pathlib import Path, PurePath
from typing import TYPE_CHECKING

from starlette.datastructures import FormData, UploadFile

from ..documents import LOADERS, load
from ..errors import (
    BusyError,
    CitewiseError,
    DocumentError,
    EmbedderError,
    StoreError,
    UnsupportedTypeError,
    UploadTooLargeError,
)
from ..kb import KnowledgeBase
from ..records import Document
from ..storable import unprintable
from .compute import check_kb
from .models import FileResult
from .problems import status_of

if TYPE_CHECKING:  # deps imports the job runner, which imports this module
    from .deps import Services

log = logging.getLogger(__name__)
READ_BLOCK = 1 << 20
MAX_SHOWN = 256  # characters of a file name echoed in its result
MAX_FIELDS = 8  # form fields that are not files (each one is refused, with its name)

Outcome = tuple[FileResult, CitewiseError | None]  # a file's result, and why it was rejected


def check_filename(raw: str | None) -> str:
    """The file's name as sent, if it can be a document id: a plain name, no folder, no control
    characters, a supported type."""
    name = raw or ""
    if not name:
        raise DocumentError("a file part has no file name")
    if unprintable(name):
        raise DocumentError("the file name holds a control character; rename the file")
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


def _receive(upload: UploadFile, limit: int) -> bytes:
    """One upload's bytes, refused once they pass ``limit``."""
    blocks, size = [], 0
    while block := upload.file.read(READ_BLOCK):
        size += len(block)
        if size > limit:
            raise UploadTooLargeError(f"over the upload limit of {limit:,} bytes")
        blocks.append(block)
    return b"".join(blocks)


def _load(path: Path, folder: Path) -> Document:
    try:
        return load(path, folder)
    except DocumentError:
        raise
    except Exception as e:  # a parser's own failure on a hostile file is that file's failure
        log.warning("loading an uploaded %s failed: %r", path.suffix, e)
        raise DocumentError(f"not a readable {path.suffix.lstrip('.').upper()} file") from None


def rejected(filename: str, error: CitewiseError, folder: Path | None = None) -> Outcome:
    reason = str(error)
    if folder is not None:
        reason = reason.replace(f"{folder}{os.sep}", "").replace(str(folder), "")
    name = PurePath(filename).name if filename else ""
    reason = reason.removeprefix(f"{name}: ") if name else reason
    return FileResult(filename=filename, doc_id=None, status="rejected", reason=reason), error


def shown(upload: UploadFile) -> str:
    """The file name a result echoes."""
    return (upload.filename or "")[:MAX_SHOWN]


def receive(upload: UploadFile, limit: int) -> tuple[str, bytes] | Outcome:
    """A file's name and bytes, or its rejection (a bad name, over ``limit`` bytes)."""
    try:
        return check_filename(upload.filename), _receive(upload, limit)
    except DocumentError as e:
        return rejected(shown(upload), e)


def ingest_file(services: Services, kb: KnowledgeBase, filename: str, name: str, data: bytes,
                busy_raises: bool = False) -> Outcome:
    """Load and store one received file (``filename`` as its result shows it) in one of its
    tenant's compute lanes. The store's or the embedder's failure is raised (the service, not
    the file), and with ``busy_raises`` a ``BusyError`` (no lane free: a job waits and tries
    again); any other failure is the file's rejection."""
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
        check_kb(kb.name, kb.config, services.settings)
        with services.compute.hold(kb.tenant_id):
            report = services.engine().ingest(kb, [doc])
    except (StoreError, EmbedderError):
        raise  # the service, not the file: 503, and a retry is safe
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


def upload_status(errors: list[CitewiseError | None]) -> int:
    """An upload's status from its files' errors (``None`` for a file stored or unchanged), by
    their kinds in ``STATUS``, never their messages: 200 if any file was stored; else 413 if a
    file was over the upload limit, 415 if every file was of an unsupported type, else 422."""
    if not errors or any(e is None for e in errors):
        return 200
    codes = {status_of(e) for e in errors if e is not None}
    if 413 in codes:
        return 413
    return 415 if codes == {415} else 422


def form_files(form: FormData, max_files: int) -> list[UploadFile]:
    for key in form:
        if key != "files":
            raise DocumentError(f"files: unexpected form field {key[:64]!r}; send only `files` parts")
    parts = form.getlist("files")
    if not parts:
        raise DocumentError("files: send one or more files as multipart/form-data `files` parts")
    files = [f for f in parts if isinstance(f, UploadFile)]
    if len(files) < len(parts):
        raise DocumentError("files: a `files` part is not a file (it has no filename)")
    if len(files) > max_files:
        raise DocumentError(f"{len(files)} files in one request; the limit is {max_files}")
    if len({f.filename for f in files}) < len(files):
        raise DocumentError("two uploaded files have the same name; a name is a document's id")
    return files
