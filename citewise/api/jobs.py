"""``/v1/jobs``: ingestion jobs, made by an upload (``POST /v1/kbs/{kb}/documents``) and run by
``job_runner.py``. A job of another tenant reads exactly like a missing one."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Path

from citewise.api.deps import Caller, tenant_caller
from citewise.api.models import JobOut
from citewise.errors import JobError
from citewise.stores.job_rows import Job

router = APIRouter(prefix="/v1/jobs", tags=["knowledge bases"])


def job_out(job: Job) -> dict:
    return {"id": job.id, "kb": job.kb, "state": job.state, "documents_done": job.done,
            "documents_total": job.total, "files": list(job.results), "error": job.error,
            "created_at": job.created_at, "updated_at": job.updated_at}


@router.get("/{job_id}", response_model=JobOut)
def show_job(job_id: str = Path(..., min_length=1, max_length=64, description="The job's id."),
             caller: Caller = Depends(tenant_caller)) -> dict:
    """An ingestion job of the caller's tenant: its state (queued, running, done, failed), the
    documents done of the total, and each file's result so far."""
    job = caller.services.store().jobs.get_job(job_id, caller.key.tenant_id)
    if job is None:
        raise JobError(f"No ingestion job {job_id!r}")
    return job_out(job)
