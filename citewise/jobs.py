"""Running ingestion jobs (``store.jobs``, ``stores/job_rows.py``): a few threads per process
that ingest each job's files one at a time. A file's result is recorded as soon as it is known,
so polling the job shows the documents done. The HTTP service runs its tenants' jobs here with
each file in one of its tenant's compute lanes (``api/job_runner.py``); the console runs the
operator's own (tenant 0, ``ui/upload_page.py``) in the same job rows.

A process resumes the jobs left queued or running (a stopped or crashed process's; a server
the tenants', a console the operator's): the job's files without a result run again from their
bytes kept in the store. A file that was stored just before the stop, its result not yet
recorded, then reads ``unchanged``. A job whose knowledge base is gone, or whose store or
embedder fails, ends ``failed`` with the reason. Several processes of one kind on one store
each resume at start-up; the last to claim a job runs it, and the one it was taken from stops
at its next file (``job_rows.py``).
"""

from __future__ import annotations

import logging
import secrets
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from .errors import BusyError, CitewiseError, DocumentError, EmbedderError, KnowledgeBaseError, StoreError
from .kb import KnowledgeBase
from .stores import Store, open_store
from .stores.job_rows import Job
from .stores.kb_cache import KBCache
from .uploaded import FileResult, rejected

log = logging.getLogger(__name__)
OPERATOR = 0  # the tenant id of the operator's own knowledge bases (the CLI's, the console's)
BUSY_WAIT_S = 0.5  # between tries for a compute lane while the tenant's lanes are full
# one file of a job: its result; BusyError while no compute lane is free (the runner waits and
# tries again); StoreError or EmbedderError when the service fails (the job fails)
IngestFile = Callable[[KnowledgeBase, str, bytes], FileResult]


class ThreadStores:
    """A store connection per thread (SQLite connections are not shared between threads), all
    sharing the first one's cache of knowledge bases (``stores/kb_cache.py``): its byte budget
    bounds the process, and a keyword index or dense matrix is built once, not per thread."""

    def __init__(self, url: str) -> None:
        self.url = url
        self._local = threading.local()
        self._opened: list[Store] = []
        self._lock = threading.Lock()
        self.cache: KBCache | None = None

    def __call__(self) -> Store:
        store = getattr(self._local, "store", None)
        if store is None:
            with self._lock:
                store = open_store(self.url, cache=self.cache)
                self.cache = store.cache
                self._opened.append(store)
            self._local.store = store
        return store

    def close(self) -> None:
        with self._lock:
            for store in self._opened:
                store.close()
            self._opened.clear()


class JobRunner:
    """``store`` gives this thread's store; ``detail`` is what a failed job says of an error
    (the HTTP service hides the store's and providers' own messages)."""

    def __init__(self, store: Callable[[], Store], ingest: IngestFile, threads: int,
                 detail: Callable[[CitewiseError], str] = str) -> None:
        self.store, self.ingest, self.detail = store, ingest, detail
        self.runner = secrets.token_hex(8)  # this process, as the jobs it runs record it
        self._pool = ThreadPoolExecutor(threads, thread_name_prefix="citewise-job")
        self._stop = threading.Event()

    def submit(self, job: Job) -> None:
        self._pool.submit(self._run, job)

    def resume(self, operator: bool = False) -> list[Job]:
        """Queue the jobs left queued or running: the tenants' (the HTTP service's), or with
        ``operator`` the operator's own (tenant 0, the console's); them. Each kind of process
        resumes only its own, so a server never takes a job from a console running it, nor
        runs the operator's knowledge base under the tenants' allowed providers."""
        jobs = [j for j in self.store().jobs.unfinished_jobs()
                if (j.tenant_id == OPERATOR) == operator]
        for job in jobs:
            log.info("resuming ingestion job %s (%d of %d files done)", job.id, job.done, job.total)
            self.submit(job)
        return jobs

    def close(self) -> None:
        """Stop after each running job's current file; the rest stays for the next start."""
        self._stop.set()
        self._pool.shutdown(wait=True, cancel_futures=True)

    def _run(self, job: Job) -> None:
        jobs = self.store().jobs
        try:
            if self._stop.is_set() or not jobs.claim(job.id, self.runner):
                return
            ran, error = self._files(job)
            if ran:
                jobs.finish(job.id, self.runner, error)
        except (StoreError, EmbedderError) as e:
            self._fail(job, self.detail(e))
        except Exception as e:  # a job never takes its thread down; it says it failed
            log.exception("ingestion job %s failed", job.id)
            self._fail(job, f"internal error ({type(e).__name__})")

    def _fail(self, job: Job, reason: str) -> None:
        try:
            self.store().jobs.finish(job.id, self.runner, reason)
        except StoreError as e:  # left running: resumed at the next start
            log.warning("ingestion job %s: could not record its failure: %s", job.id, e)

    def _files(self, job: Job) -> tuple[bool, str | None]:
        """Run the job's pending files: whether the job ended (False when this process
        stopped or no longer runs it), and why it failed if it did."""
        store = self.store()
        for ordinal, filename in store.jobs.pending_files(job.id):
            if self._stop.is_set():
                return False, None
            try:
                kb = store.get_kb(job.kb, job.tenant_id)
            except KnowledgeBaseError:
                return True, f"knowledge base {job.kb!r} no longer exists"
            data = store.jobs.file_content(job.id, ordinal)
            if data is None:
                result: FileResult | None = rejected(filename, DocumentError("its bytes were lost"))[0]
            else:
                result = self._ingest(kb, filename, data)
            if result is None or not store.jobs.record_file(
                    job.id, self.runner, ordinal, result.as_dict()):
                return False, None
        return True, None

    def _ingest(self, kb: KnowledgeBase, filename: str, data: bytes) -> FileResult | None:
        """One file, waiting for a lane while the tenant's are full; None if stopped meanwhile."""
        while not self._stop.is_set():
            try:
                return self.ingest(kb, filename, data)
            except BusyError:
                self._stop.wait(BUSY_WAIT_S)
        return None
