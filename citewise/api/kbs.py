"""``/v1/kbs``: a tenant's knowledge bases and their documents.

Uploads go to a temporary folder, one file at a time, through the same loader and ingest path
as ``citewise ingest``; each file gets its own result, and a bad file changes nothing stored.
"""

from __future__ import annotations

import dataclasses
import tempfile
from pathlib import Path, PurePath

from fastapi import APIRouter, Depends, File, Response, UploadFile
from fastapi.responses import JSONResponse

from ..documents import LOADERS, load
from ..errors import AlreadyExistsError, DocumentError, KnowledgeBaseError
from ..gate import gate_for
from ..tenancy import check_kb_name, store_name
from .deps import Caller, Scoped, missing, resolve, tenant_caller, tenant_kb
from .models import DocumentOut, FileResult, KBIn, KBOut, UploadOut
from .settings import Settings, get_settings

router = APIRouter(prefix="/v1/kbs", tags=["knowledge bases"])
READ_BLOCK = 1 << 20


def kb_out(s: Scoped) -> dict:
    store = s.caller.services.store()
    the_gate, warnings = gate_for(s.kb.config)
    setting = s.kb.config.gate
    return {
        "name": s.name, "created_at": s.kb.created_at, "embedder": s.kb.config.embedder,
        "chunker": s.kb.config.chunker, "documents": len(store.list_documents(s.kb)),
        "chunks": store.count_chunks(s.kb),
        "gate": {"policy": the_gate.policy, "threshold": the_gate.threshold,
                 "source": setting.source if setting and not warnings else "default",
                 "warnings": warnings},
    }


@router.get("", response_model=list[KBOut])
def list_kbs(caller: Caller = Depends(tenant_caller)) -> list[dict]:
    """The knowledge bases of the caller's tenant."""
    owned = caller.services.tenants().owned_kbs(caller.key.tenant_id)
    return [kb_out(resolve(caller, name)) for name, _ in owned]


@router.post("", status_code=201, response_model=KBOut)
def create_kb(body: KBIn, caller: Caller = Depends(tenant_caller),
              settings: Settings = Depends(get_settings)) -> dict:
    """Create an empty knowledge base; upload documents to it next. 409 if the tenant has
    one of that name: of concurrent requests for one name exactly one gets 201."""
    name = check_kb_name(body.name)
    tenants = caller.services.tenants()
    if tenants.owned_kb(caller.key.tenant_id, name) is not None:
        raise AlreadyExistsError(f"Knowledge base {name!r} already exists")
    held = store_name(caller.key.tenant_id, name)
    try:
        kb = caller.services.engine().create_kb(held, body.embedder or settings.embedder,
                                                body.chunker)
    except AlreadyExistsError:  # a request racing this one, or one that stopped before its
        kb = caller.services.store().get_kb(held)  # owner row: the owner row decides
    tenants.own_kb(caller.key.tenant_id, name, kb.id)
    return kb_out(resolve(caller, name))


@router.get("/{kb}", response_model=KBOut)
def show_kb(s: Scoped = Depends(tenant_kb)) -> dict:
    return kb_out(s)


@router.delete("/{kb}", status_code=204, response_class=Response)
def delete_kb(s: Scoped = Depends(tenant_kb)) -> Response:
    """Delete a knowledge base with its documents, query log and feedback."""
    s.caller.services.store().delete_kb(s.kb.name)
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


def _filename(upload: UploadFile) -> str:
    name = PurePath((upload.filename or "").replace("\\", "/")).name
    if not name or name.startswith(".") or len(name) > 200:
        raise DocumentError(f"{upload.filename!r} is not a usable file name")
    if PurePath(name).suffix.lower() not in LOADERS:
        raise DocumentError(
            f"unsupported file type {PurePath(name).suffix or '(none)'}; "
            f"supported: {', '.join(sorted(LOADERS))}"
        )
    return name


def _receive(upload: UploadFile, folder: Path, limit: int) -> Path:
    """Copy one upload into ``folder``, refusing it once it passes ``limit`` bytes."""
    name = _filename(upload)
    path = folder / name
    size = 0
    with path.open("wb") as out:
        while block := upload.file.read(READ_BLOCK):
            size += len(block)
            if size > limit:
                raise DocumentError(f"over the upload limit of {limit:,} bytes")
            out.write(block)
    return path


def _ingest_one(s: Scoped, upload: UploadFile, folder: Path, limit: int) -> FileResult:
    filename = upload.filename or ""
    try:
        path = _receive(upload, folder, limit)
        doc = load(path, folder)
    except DocumentError as e:
        reason = str(e).removeprefix(f"{folder / PurePath(filename).name}: ")
        return FileResult(filename=filename, doc_id=None, status="rejected", reason=reason)
    doc = dataclasses.replace(doc, source=f"upload:{doc.id}")
    with s.compute():
        report = s.engine().ingest(s.kb, [doc])
    for status in ("added", "replaced", "unchanged"):
        if doc.id in getattr(report, status):
            return FileResult(filename=filename, doc_id=doc.id, status=status, chunks=report.chunks)
    reason = report.skipped[0].reason if report.skipped else "not stored"
    return FileResult(filename=filename, doc_id=doc.id, status="rejected", reason=reason)


@router.post("/{kb}/documents", response_model=UploadOut,
             responses={413: {"model": UploadOut}, 415: {"model": UploadOut},
                        422: {"model": UploadOut}})
def upload_documents(files: list[UploadFile] = File(..., description="One or more files."),
                     s: Scoped = Depends(tenant_kb),
                     settings: Settings = Depends(get_settings)) -> JSONResponse:
    """Add or replace documents (Markdown, text, HTML, PDF, DOCX), one result per file.

    200 when at least one file was stored or unchanged; otherwise 413 (a file over the size
    limit), 415 (unsupported types only) or 422 (unreadable, empty, not UTF-8...)."""
    if len(files) > settings.max_files:
        raise DocumentError(f"{len(files)} files in one request; the limit is {settings.max_files}")
    if len({PurePath((f.filename or "").replace("\\", "/")).name for f in files}) < len(files):
        raise DocumentError("two uploaded files have the same name; a name is a document's id")
    results: list[FileResult] = []
    for upload in files:
        with tempfile.TemporaryDirectory(prefix="citewise-upload-") as tmp:
            results.append(_ingest_one(s, upload, Path(tmp), settings.max_upload_bytes))
    status = 200
    if all(r.status == "rejected" for r in results):
        reasons = [r.reason or "" for r in results]
        if any("upload limit" in r for r in reasons):
            status = 413
        elif all(r.startswith("unsupported file type") for r in reasons):
            status = 415
        else:
            status = 422
    return JSONResponse(UploadOut(files=results).model_dump(), status_code=status)


__all__ = ["router", "missing"]
