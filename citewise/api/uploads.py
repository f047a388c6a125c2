"""Uploaded files over HTTP, one at a time: the name and size checks made as a file is
received, and its ingest (``citewise/ingest/uploaded.py``) in one of its tenant's compute lanes with
the providers the operator allows. Each file gets its own result, and a bad file changes
nothing stored. The synchronous upload (``kbs.py``) and the ingestion jobs (``job_runner.py``)
both use these; a synchronous upload that the store fails part way says which files it stored
(``failed_part_way``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from starlette.datastructures import FormData, UploadFile

from citewise.api.compute import check_kb, public_detail
from citewise.api.problems import status_of
from citewise.errors import CitewiseError, DocumentError
from citewise.ingest.uploaded import FileResult, Outcome, check_filename, rejected, store_file, too_large
from citewise.kb import KnowledgeBase
from citewise.records import Document
from citewise.storable import name_form

if TYPE_CHECKING:  # deps imports the job runner, which imports this module
    from citewise.api.services import Services
    from citewise.engine import IngestReport

READ_BLOCK = 1 << 20
MAX_SHOWN = 256  # characters of a file name echoed in its result
MAX_FIELDS = 8  # form fields that are not files (each one is refused, with its name)
MAX_DETAIL = 2000  # characters of a failed upload's detail (the results name every file stored)


def _receive(upload: UploadFile, limit: int) -> bytes:
    """One upload's bytes, refused once they pass ``limit``."""
    blocks, size = [], 0
    while block := upload.file.read(READ_BLOCK):
        size += len(block)
        if size > limit:
            raise too_large(limit)
        blocks.append(block)
    return b"".join(blocks)


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
    """``uploaded.store_file`` in one of the tenant's compute lanes, after checking that the
    operator allows the knowledge base's providers."""

    def store_doc(kb: KnowledgeBase, doc: Document) -> IngestReport:
        check_kb(kb.name, kb.config, services.settings)
        with services.compute.hold(kb.tenant_id):
            return services.engine().ingest(kb, [doc])

    return store_file(kb, filename, name, data, store_doc, busy_raises)


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


def failed_part_way(error: CitewiseError, results: list[FileResult], sent: list[str]) -> str:
    """The ``detail`` of a synchronous upload of ``sent`` that the store or the embedder failed
    part way, ``results`` the outcomes of the files before: what a caller may be told of the
    failure (``compute.public_detail``), the files stored (or unchanged) and the files not
    stored, the one being stored when it failed and those after it (not rejected ones: their
    results say why)."""
    stored = [r.filename for r in results if r.status != "rejected"]
    detail = (f"{public_detail(error)}. Stored: {', '.join(stored) or 'none'}. "
              f"Not stored (upload them again): {', '.join(sent[len(results):])}.")
    return detail if len(detail) <= MAX_DETAIL else detail[:MAX_DETAIL - 3] + "..."


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
    if len({name_form(f.filename or "") for f in files}) < len(files):  # in either Unicode form
        raise DocumentError("two uploaded files have the same name; a name is a document's id")
    return files


__all__ = ["FileResult", "MAX_FIELDS", "Outcome", "failed_part_way", "form_files", "ingest_file",
           "receive", "shown", "upload_status"]
