"""The HTTP service's ingestion jobs: the runner of ``citewise/ingest/jobs.py`` with each file ingested
exactly as a synchronous upload does (``uploads.ingest_file``): in one of its tenant's compute
lanes (``compute.FairCompute``), with the providers the operator allows, and a failed job
saying only what a caller may be told (``compute.public_detail``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from citewise.api.compute import public_detail
from citewise.api.uploads import ingest_file
from citewise.ingest.jobs import JobRunner
from citewise.ingest.uploaded import FileResult
from citewise.kb import KnowledgeBase

if TYPE_CHECKING:
    from citewise.api.services import Services


def service_runner(services: Services, threads: int) -> JobRunner:
    def ingest(kb: KnowledgeBase, filename: str, data: bytes) -> FileResult:
        return ingest_file(services, kb, filename, filename, data, busy_raises=True)[0]

    return JobRunner(services.store, ingest, threads, detail=public_detail,
                     lease_s=services.settings.job_lease_s)


__all__ = ["JobRunner", "service_runner"]
