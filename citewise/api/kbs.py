"""``/v1/kbs``: a tenant's knowledge bases and their documents.

Uploads go to a temporary folder, one file at a time, through the same loader and ingest path
as ``citewise ingest``; each file gets its own result, and a bad file changes nothing stored.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import tempfile
from pathlib import Path, PurePath

from fastapi import APIRouter, Depends, Request, Response
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse
from starlette.datastructures import FormData, UploadFile
from starlette.exceptions import HTTPException

from ..documents import LOADERS, load
from ..errors import (
    AlreadyExistsError,
    CitewiseError,
    DocumentError,
    EmbedderError,
    KnowledgeBaseError,
    StoreError,
    UnsupportedTypeError,
    UploadTooLargeError,
)
from ..gate import gate_for
from ..records import Document
from ..storable import unprintable
from ..tenancy import check_kb_name
from .compute import choose
from .deps import Caller, Scoped, missing, tenant_caller, tenant_kb
from .limits import BodyTooLarge
from .models import DocumentOut, FileResult, KBIn, KBOut, Problem, UploadOut, rejected_detail
from .problems import status_of
from .settings import Settings, get_settings

router = APIRouter(prefix="/v1/kbs", tags=["knowledge bases"])
log = logging.getLogger(__name__)
READ_BLOCK = 1 << 20
MAX_SHOWN = 256  # characters of a file name echoed in its result
MAX_FIELDS = 8  # form fields that are not files (each one is refused, with its name)


def kb_out(s: Scoped) -> dict:
    store = s.caller.services.store()
    the_gate, warnings = gate_for(s.kb.config)
    setting = s.kb.config.gate
    return {
        "name": s.name, "created_at": s.kb.created_at, "embedder": s.kb.config.embedder,
        "generator": s.kb.config.generator, "chunker": s.kb.config.chunker,
        "documents": len(store.list_documents(s.kb)),
        "chunks": store.count_chunks(s.kb),
        "gate": {"policy": the_gate.policy, "threshold": the_gate.threshold,
                 "source": setting.source if setting and not warnings else "default",
                 "warnings": warnings},
    }


@router.get("", response_model=list[KBOut])
def list_kbs(caller: Caller = Depends(tenant_caller)) -> list[dict]:
    """The knowledge bases of the caller's tenant."""
    return [kb_out(Scoped(kb, caller))
            for kb in caller.services.store().list_kbs(tenant=caller.key.tenant_id)]


@router.post("", status_code=201, response_model=KBOut)
def create_kb(body: KBIn, caller: Caller = Depends(tenant_caller),
              settings: Settings = Depends(get_settings)) -> dict:
    """Create an empty knowledge base; upload documents to it next. ``embedder`` and
    ``generator`` are names the server allows (a 422 lists them); the first is the default.
    409 if the tenant has one of that name: of concurrent requests for one name exactly one
    gets 201."""
    name, tenant = check_kb_name(body.name), caller.key.tenant_id
    store = caller.services.store()
    try:
        store.get_kb(name, tenant)
    except KnowledgeBaseError:
        pass  # the name is free (of two requests for it at once, the store lets one create it)
    else:
        raise AlreadyExistsError(f"Knowledge base {name!r} already exists")
    embedder = choose("embedder", body.embedder, settings.allowed_embedders)
    generator = choose("generator", body.generator, settings.allowed_generators)
    with caller.services.compute.hold(tenant):  # a hosted model may be asked its size
        kb = caller.services.engine().create_kb(name, embedder, body.chunker, tenant=tenant)
    if generator != kb.config.generator:
        kb = store.update_kb(name, dataclasses.replace(kb.config, generator=generator), tenant)
    return kb_out(Scoped(kb, caller))


@router.get("/{kb}", response_model=KBOut)
def show_kb(s: Scoped = Depends(tenant_kb)) -> dict:
    return kb_out(s)


@router.delete("/{kb}", status_code=204, response_class=Response)
def delete_kb(s: Scoped = Depends(tenant_kb)) -> Response:
    """Delete a knowledge base with its documents, query log and feedback."""
    s.caller.services.store().delete_kb(s.kb.name, s.kb.tenant_id)
    return Response(status_code=204)


@router.get("/{kb}/documents", response_model=list[DocumentOut])
def list_documents(s: Scoped = Depends(tenant_kb)) -> list[dict]:
    docs = s.caller.services.store().list_documents(s.kb)
    return [{k: v for k, v in dataclasses.asdict(d).items() if k != "source"} for d in docs]


@router.delete("/{kb}/documents/{doc_id:path}", status_code=204, response_class=Response)
def delete_document(doc_id: str, s: Scoped = Depends(tenant_kb)) -> Response:
    if not s.caller.services.store().delete_document(s.kb, doc_id):
        raise KnowledgeBaseError(f"No document {doc_id!r} in knowledge base {s.name!r}")
    return Response(status_code=204)


def _filename(raw: str | None) -> str:
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


def _receive(upload: UploadFile, path: Path, limit: int) -> Path:
    """Copy one upload to ``path``, refusing it once it passes ``limit`` bytes."""
    size = 0
    with path.open("wb") as out:
        while block := upload.file.read(READ_BLOCK):
            size += len(block)
            if size > limit:
                raise UploadTooLargeError(f"over the upload limit of {limit:,} bytes")
            out.write(block)
    return path


def _load(path: Path, folder: Path) -> Document:
    try:
        return load(path, folder)
    except DocumentError:
        raise
    except Exception as e:  # a parser's own failure on a hostile file is that file's failure
        log.warning("loading an uploaded %s failed: %r", path.suffix, e)
        raise DocumentError(f"not a readable {path.suffix.lstrip('.').upper()} file") from None


Outcome = tuple[FileResult, CitewiseError | None]  # a file's result, and why it was rejected


def _rejected(filename: str, error: CitewiseError, folder: Path) -> Outcome:
    reason = str(error).replace(f"{folder}{os.sep}", "").replace(str(folder), "")
    name = PurePath(filename).name if filename else ""
    reason = reason.removeprefix(f"{name}: ") if name else reason
    return FileResult(filename=filename, doc_id=None, status="rejected", reason=reason), error


def _ingest_one(s: Scoped, upload: UploadFile, folder: Path, limit: int) -> Outcome:
    shown = (upload.filename or "")[:MAX_SHOWN]
    try:
        name = _filename(upload.filename)
        doc = _load(_receive(upload, folder / name, limit), folder)
    except DocumentError as e:
        return _rejected(shown, e, folder)
    doc = dataclasses.replace(doc, source=f"upload:{doc.id}")
    try:
        with s.compute():
            report = s.engine().ingest(s.kb, [doc])
    except (StoreError, EmbedderError):
        raise  # the service, not the file: 503, and a retry is safe
    except Exception as e:  # each document is stored in its own transaction: whole or not at all
        log.warning("storing uploaded %r failed: %r", doc.id, e)
        error = e if isinstance(e, CitewiseError) else DocumentError(
            f"could not be stored ({type(e).__name__})")
        return _rejected(shown, error, folder)
    for status in ("added", "replaced", "unchanged"):
        if doc.id in getattr(report, status):
            return FileResult(filename=shown, doc_id=doc.id, status=status,
                              chunks=report.chunks), None
    return _rejected(shown, DocumentError(report.skipped[0].reason if report.skipped
                                          else "not stored"), folder)


def _ingest_all(s: Scoped, files: list[UploadFile], limit: int) -> list[Outcome]:
    results = []
    for upload in files:
        with tempfile.TemporaryDirectory(prefix="citewise-upload-") as tmp:
            results.append(_ingest_one(s, upload, Path(tmp), limit))
    return results


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


def _files(form: FormData, max_files: int) -> list[UploadFile]:
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


UPLOAD_BODY = {"requestBody": {"required": True, "content": {"multipart/form-data": {"schema": {
    "type": "object", "required": ["files"], "additionalProperties": False,
    "properties": {"files": {"type": "array", "minItems": 1, "description": "One or more files.",
                             "items": {"type": "string", "format": "binary"}}},
}}}}}


@router.post("/{kb}/documents", response_model=UploadOut, openapi_extra=UPLOAD_BODY,
             responses={413: {"model": UploadOut | Problem}, 415: {"model": UploadOut},
                        422: {"model": UploadOut | Problem}})
async def upload_documents(request: Request, s: Scoped = Depends(tenant_kb),
                           settings: Settings = Depends(get_settings)) -> JSONResponse:
    """Add or replace documents (Markdown, text, HTML, PDF, DOCX), one result per file.

    Each file is reported on its own and stored whole or not at all: a bad file (unreadable,
    empty, over the size limit, a name with a folder or control characters) is a ``rejected``
    line with its reason and changes nothing stored, while the good files beside it are stored.
    200 when at least one file was stored or unchanged; otherwise 413 (a file over the size
    limit), 415 (unsupported types only) or 422 (unreadable, empty, not UTF-8...).

    The key is checked before the body is read; a body over ``max_files`` x
    ``max_upload_bytes`` is refused with 413 unread."""
    try:
        form = await request.form(max_files=settings.max_files, max_fields=MAX_FIELDS)
    except BodyTooLarge:
        raise
    except HTTPException as e:  # starlette's word for a malformed or overfull multipart body
        raise DocumentError(
            f"files: not a usable upload ({e.detail}) An upload is 1 to {settings.max_files} "
            f"files of up to {settings.max_upload_bytes:,} bytes each, as `files` parts."
        ) from None
    try:
        files = _files(form, settings.max_files)
        outcomes = await run_in_threadpool(_ingest_all, s, files, settings.max_upload_bytes)
    finally:
        await form.close()
    results = [r for r, _ in outcomes]
    status = upload_status([e for _, e in outcomes])
    detail = rejected_detail([(r.filename, r.reason) for r in results]) if status != 200 else None
    return JSONResponse(UploadOut(files=results, detail=detail).model_dump(), status_code=status)


__all__ = ["router", "missing"]
