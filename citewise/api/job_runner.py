"""Running ingestion jobs: a few threads per process that ingest each job's files one at a
time, each file in one of its tenant's compute lanes (``compute.FairCompute``), exactly as a
synchronous upload does. A file's result is recorded as soon as it is known, so polling shows
the documents done.

At start-up a server resumes every job left queued or running (a stopped or crashed server's):
the job's files without a result run again from their bytes kept in the store. A file that was
stored just before the stop, its result not yet recorded, then reads ``unchanged``. A job whose
knowledge base is gone, or whose store or embedder fails, ends ``failed`` with the reason.
Several processes on one store each resume at start-up; the last to claim a job runs it, and
the one it was taken from stops at its next file (``job_rows.py``).
"""

from __future__ import annotations

import logging
import secrets
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING

from ..errors import BusyError, DocumentError, EmbedderError, KnowledgeBaseError, StoreError
from ..kb import KnowledgeBase
from ..stores.job_rows import Job
from .compute import public_detail
from .uploads import Outcome, ingest_file, rejected

if TYPE_CHECKING:
    from .deps import Services

log = logging.getLogger(__name__)
BUSY_WAIT_S = 0.5  # between tries for a compute lane while the tenant's lanes are full


class JobRunner:
    def __init__(self, services: Services, threads: int) -> None:
        self.services = services
        self.runner = secrets.token_hex(8)  # this process, as the jobs it runs record it
        self._pool = ThreadPoolExecutor(threads, thread_name_prefix="citewise-job")
        self._stop = threading.Event()

    def submit(self, job: Job) -> None:
        self._pool.submit(self._run, job)

    def resume(self) -> int:
        """Queue every job left queued or running; how many."""
        jobs = self.services.store().jobs.unfinished_jobs()
        for job in jobs:
            log.info("resuming ingestion job %s (%d of %d files done)", job.id, job.done, job.total)
            self.submit(job)
        return len(jobs)

    def close(self) -> None:
        """Stop after each running job's current file; the rest stays for the next start."""
        self._stop.set()
        self._pool.shutdown(wait=True, cancel_futures=True)

    def _run(self, job: Job) -> None:
        jobs = self.services.store().jobs
        try:
            if self._stop.is_set() or not jobs.claim(job.id, self.runner):
                return
            ran, error = self._files(job)
            if ran:
                jobs.finish(job.id, self.runner, error)
        except (StoreError, EmbedderError) as e:
            self._fail(job, public_detail(e))
        except Exception as e:  # a job never takes its thread down; it says it failed
            log.exception("ingestion job %s failed", job.id)
            self._fail(job, f"internal error ({type(e).__name__})")

    def _fail(self, job: Job, reason: str) -> None:
        try:
            self.services.store().jobs.finish(job.id, self.runner, reason)
        except StoreError as e:  # left running: resumed at the next start
            log.warning("ingestion job %s: could not record its failure: %s", job.id, e)

    def _files(self, job: Job) -> tuple[bool, str | None]:
        """Run the job's pending files: whether the job ended (False when this process
        stopped or no longer runs it), and why it failed if it did."""
        store = self.services.store()
        for ordinal, filename in store.jobs.pending_files(job.id):
            if self._stop.is_set():
                return False, None
            try:
                kb = store.get_kb(job.kb, job.tenant_id)
            except KnowledgeBaseError:
                return True, f"knowledge base {job.kb!r} no longer exists"
            data = store.jobs.file_content(job.id, ordinal)
            if data is None:
                outcome: Outcome | None = rejected(filename, DocumentError("its bytes were lost"))
            else:
                outcome = self._ingest(kb, filename, data)
            if outcome is None or not store.jobs.record_file(
                    job.id, self.runner, ordinal, outcome[0].model_dump()):
                return False, None
        return True, None

    def _ingest(self, kb: KnowledgeBase, filename: str, data: bytes) -> Outcome | None:
        """One file, waiting for a lane while the tenant's are full; None if stopped meanwhile."""
        while not self._stop.is_set():
            try:
                return ingest_file(self.services, kb, filename, filename, data, busy_raises=True)
            except BusyError:
                self._stop.wait(BUSY_WAIT_S)
        return None
