"""``/v1/kbs``: a tenant's knowledge bases and their documents.

An upload is kept in the store as an ingestion job and answered at once (``job_runner.py``
runs it, ``jobs.py`` shows it); with ``?wait=true`` it is ingested before the answer. Either
way each file goes through the same checks, loader and ingest path (``uploads.py``) and gets
its own result, and a bad file changes nothing stored.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Iterator

from fastapi import APIRouter, Depends, Query, Request, Response
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse
from starlette.datastructures import UploadFile
from starlette.exceptions import HTTPException

from citewise.answer.gate import gate_for
from citewise.api.compute import check_kb, choose
from citewise.api.deps import Caller, Scoped, missing, tenant_caller, tenant_kb
from citewise.api.jobs import job_out
from citewise.api.limits import BodyTooLarge
from citewise.api.models import DocumentOut, JobOut, KBIn, KBOut, Problem, UploadOut, rejected_detail
from citewise.api.problems import status_of
from citewise.api.settings import Settings, get_settings
from citewise.api.uploads import (
    MAX_FIELDS,
    FileResult,
    Outcome,
    failed_part_way,
    form_files,
    ingest_file,
    receive,
    shown,
    upload_status,
)
from citewise.errors import AlreadyExistsError, DocumentError, EmbedderError, KnowledgeBaseError, StoreError
from citewise.storable import name_form
from citewise.stores.job_rows import Job, JobFile
from citewise.tenancy import check_kb_name

router = APIRouter(prefix="/v1/kbs", tags=["knowledge bases"])
log = logging.getLogger(__name__)


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
    doc_id = name_form(doc_id)  # either Unicode form of a name finds it
    if not s.caller.services.store().delete_document(s.kb, doc_id):
        raise KnowledgeBaseError(f"No document {doc_id!r} in knowledge base {s.name!r}")
    return Response(status_code=204)


def _ingest_all(s: Scoped, files: list[UploadFile], limit: int
                ) -> tuple[list[Outcome], StoreError | EmbedderError | None]:
    """Each file's outcome, in order, until the store or the embedder fails (the failure then,
    with the outcomes of the files before it: the rest are left unread)."""
    outcomes = []
    for upload in files:
        got = receive(upload, limit)
        if isinstance(got[0], FileResult):
            outcomes.append(got)
            continue
        name, data = got
        try:
            outcomes.append(ingest_file(s.caller.services, s.kb, shown(upload), name, data))
        except (StoreError, EmbedderError) as e:
            return outcomes, e
    return outcomes, None


def _queue(s: Scoped, files: list[UploadFile], limit: int) -> Job:
    """A job of the files, each received (and checked) as it is written to the store."""

    def received() -> Iterator[JobFile]:
        for upload in files:
            got = receive(upload, limit)
            if isinstance(got[0], FileResult):
                yield JobFile(shown(upload), None, got[0].as_dict())
            else:
                name, data = got
                yield JobFile(name, data)

    job = s.caller.services.store().jobs.create_job(s.kb.tenant_id, s.name, received())
    s.caller.services.jobs.submit(job)
    return job


UPLOAD_BODY = {"requestBody": {"required": True, "content": {"multipart/form-data": {"schema": {
    "type": "object", "required": ["files"], "additionalProperties": False,
    "properties": {"files": {"type": "array", "minItems": 1, "description": "One or more files.",
                             "items": {"type": "string", "format": "binary"}}},
}}}}}


@router.post("/{kb}/documents", status_code=202, response_model=JobOut, openapi_extra=UPLOAD_BODY,
             responses={200: {"model": UploadOut}, 413: {"model": UploadOut | Problem},
                        415: {"model": UploadOut}, 422: {"model": UploadOut | Problem},
                        503: {"model": UploadOut | Problem}})
async def upload_documents(request: Request, s: Scoped = Depends(tenant_kb),
                           settings: Settings = Depends(get_settings),
                           wait: bool = Query(False, description="Ingest before answering, with "
                                              "one result per file (200), instead of a job (202).")
                           ) -> JSONResponse:
    """Add or replace documents (Markdown, text, HTML, PDF, DOCX), one result per file.

    By default the files are kept in the store as an ingestion job and the answer is ``202``
    with the job at once (``Location: /v1/jobs/{id}``): poll ``GET /v1/jobs/{id}`` for its
    state, the documents done and each file's result. A job survives a server restart.
    With ``?wait=true`` the files are ingested before the answer, which holds the results.

    Each file is reported on its own and stored whole or not at all: a bad file (unreadable,
    empty, over the size limit, a name with a folder or control characters) is a ``rejected``
    result with its reason and changes nothing stored, while the good files beside it are
    stored. With ``wait``: 200 when at least one file was stored or unchanged; otherwise 413 (a
    file over the size limit), 415 (unsupported types only) or 422 (unreadable, empty...). If
    the store or the embedding provider fails part way, 503 with the results of the files
    before the failure and a ``detail`` naming the files stored and those not stored.

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
        files = form_files(form, settings.max_files)
        if not wait:
            check_kb(s.name, s.kb.config, settings)  # providers not allowed: refused now
            job = await run_in_threadpool(_queue, s, files, settings.max_upload_bytes)
            return JSONResponse(job_out(job), status_code=202,
                                headers={"Location": f"/v1/jobs/{job.id}"})
        outcomes, failed = await run_in_threadpool(_ingest_all, s, files,
                                                   settings.max_upload_bytes)
        sent = [shown(f) for f in files]
    finally:
        await form.close()
    results = [r for r, _ in outcomes]
    detail: str | None
    if failed is not None:  # a 503 that says which files were stored, which were not
        status, detail = status_of(failed), failed_part_way(failed, results, sent)
    else:
        status = upload_status([e for _, e in outcomes])
        detail = rejected_detail([(r.filename, r.reason) for r in results]) if status != 200 else None
    out = UploadOut(files=[r.as_dict() for r in results], detail=detail)
    return JSONResponse(out.model_dump(), status_code=status)


__all__ = ["router", "missing"]
