"""Running ingestion jobs (``store.jobs``, ``stores/job_rows.py``): a few threads per process
that ingest each job's files one at a time. A file's result is recorded as soon as it is known,
so polling the job shows the documents done. The HTTP service runs its tenants' jobs here with
each file in one of its tenant's compute lanes (``api/job_runner.py``); the console runs the
operator's own (tenant 0, ``ui/upload_page.py``) in the same job rows.

A job is run by one process at a time, under a lease (``job_rows.py``) that a heartbeat renews
every third of it while the job runs. Every process watches for the jobs of its kind (a server
the tenants', a console the operator's) that are queued or whose lease ran out, at start-up and
then at every heartbeat, and takes them: a job whose process died, shut down or lost the store
is taken over within a lease and a third (``CITEWISE_JOB_LEASE_S``, 30 s: within 40 s), and
within a third of one from a process that stopped cleanly (it gives up its leases). The job's files without
a result run again from their bytes kept in the store; a file that was stored just before the
stop, its result not yet recorded, then reads ``unchanged``. A store error (a connection the
database dropped in the middle of a write) does the same in the job's own thread: it goes on
from its first file without a result after a pause, and only ``STORE_TRIES`` errors in a row
with no file done between them fail it. A job whose knowledge base is gone, or whose store
keeps failing, or whose embedder fails, ends ``failed`` with the reason (if the store cannot
even record that, the job is taken over once its lease runs out). A process whose lease ran out
while it stalled, the job taken by another, stops at its next file.
"""

from __future__ import annotations

import logging
import secrets
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from citewise.errors import (
    BusyError,
    CitewiseError,
    DocumentError,
    EmbedderError,
    KnowledgeBaseError,
    StoreError,
)
from citewise.ingest.uploaded import FileResult, rejected
from citewise.kb import KnowledgeBase
from citewise.stores import Store, open_store
from citewise.stores.job_rows import LEASE_S, Job
from citewise.stores.kb_cache import KBCache

log = logging.getLogger(__name__)
OPERATOR = 0  # the tenant id of the operator's own knowledge bases (the CLI's, the console's)
BUSY_WAIT_S = 0.5  # between tries for a compute lane while the tenant's lanes are full
STORE_TRIES = 3  # store errors in a row, no file done between them, that fail a job
STORE_WAIT_S = 0.5  # after a store error, before the job goes on from its first file left
# one file of a job: its result; BusyError while no compute lane is free (the runner waits and
# tries again); StoreError (tried again, ``STORE_TRIES``) or EmbedderError (the job fails) when
# the service fails
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
    (the HTTP service hides the store's and providers' own messages); ``lease_s`` is how long a
    job stays this process's without a heartbeat (``job_rows.py``)."""

    def __init__(self, store: Callable[[], Store], ingest: IngestFile, threads: int,
                 detail: Callable[[CitewiseError], str] = str, lease_s: float = LEASE_S) -> None:
        self.store, self.ingest, self.detail, self.lease_s = store, ingest, detail, lease_s
        self.runner = secrets.token_hex(8)  # this process, as the jobs it runs record it
        self._pool = ThreadPoolExecutor(threads, thread_name_prefix="citewise-job")
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._mine: set[str] = set()  # the jobs submitted here, until their thread returns
        self._held: set[str] = set()  # of those, the ones claimed: their leases renewed
        self._lost: set[str] = set()  # of those, the ones a renewal found taken over
        self._watcher: threading.Thread | None = None
        self._operator: bool | None = None  # the kind of jobs this process takes (``resume``)

    def submit(self, job: Job) -> bool:
        """Run ``job`` in one of the threads; False if it is this process's already."""
        with self._lock:
            if job.id in self._mine:
                return False
            self._mine.add(job.id)
            self._watch()
        try:
            self._pool.submit(self._run, job)
        except RuntimeError:  # closed meanwhile: the job stays for another process
            with self._lock:
                self._mine.discard(job.id)
            return False
        return True

    def resume(self, operator: bool = False) -> list[Job]:
        """Take the jobs a runner may claim now, and from now on every third of a lease: the
        tenants' (the HTTP service's), or with ``operator`` the operator's own (tenant 0, the
        console's); the ones taken now. A job may be claimed when it is queued, or its runner's
        lease ran out (its process died): it goes on from its first file without a result.
        Each kind of process takes only its own, so a server never runs the operator's knowledge
        base under the tenants' allowed providers. A ``StoreError`` here leaves the watching
        on: the jobs are taken when the store answers again."""
        with self._lock:
            self._operator = operator
            self._watch()
        return self._take(operator)

    def close(self) -> None:
        """Stop after each running job's current file and give up this process's leases: the
        jobs it leaves are queued again, for any process to take at once."""
        self._stop.set()
        if self._watcher is not None:
            self._watcher.join()
        self._pool.shutdown(wait=True, cancel_futures=True)
        try:
            self.store().jobs.release(self.runner)
        except StoreError as e:  # taken over anyway once their leases run out
            log.warning("ingestion jobs of this process not released: %s", e)

    def _watch(self) -> None:
        """Start the heartbeat (under ``_lock``, once)."""
        if self._watcher is None and not self._stop.is_set():
            self._watcher = threading.Thread(target=self._beat, name="citewise-job-lease",
                                             daemon=True)
            self._watcher.start()

    def _beat(self) -> None:
        """Every third of a lease: renew the leases of the jobs running here, and take the
        jobs a runner may claim (once ``resume`` said which kind)."""
        while not self._stop.wait(self.lease_s / 3):
            try:
                self._renew()
                if self._operator is not None:
                    self._take(self._operator)
            except StoreError as e:  # the store is down: tried again at the next beat
                log.warning("ingestion jobs: %s", e)
            except Exception:  # the heartbeat never stops while the process runs
                log.exception("ingestion jobs: the lease heartbeat failed")

    def _renew(self) -> None:
        with self._lock:
            held = sorted(self._held)
        jobs = self.store().jobs
        for public_id in held:
            if not jobs.renew(public_id, self.runner, self.lease_s):
                with self._lock:
                    if public_id in self._held:  # not finished meanwhile: taken over
                        self._lost.add(public_id)

    def _take(self, operator: bool) -> list[Job]:
        jobs, taken = self.store().jobs, []
        for public_id, tenant in jobs.claimable(operator):
            with self._lock:
                if public_id in self._mine:
                    continue
            job = jobs.get_job(public_id, tenant)
            if job is not None and self.submit(job):
                log.info("taking ingestion job %s (%d of %d files done)", job.id, job.done, job.total)
                taken.append(job)
        return taken

    def _run(self, job: Job) -> None:
        try:
            jobs = self.store().jobs
            if self._stop.is_set() or not jobs.claim(job.id, self.runner, self.lease_s):
                return
            with self._lock:
                self._held.add(job.id)
            self._tries(job)
        except (StoreError, EmbedderError) as e:
            self._fail(job, self.detail(e))
        except Exception as e:  # a job never takes its thread down; it says it failed
            log.exception("ingestion job %s failed", job.id)
            self._fail(job, f"internal error ({type(e).__name__})")
        finally:
            with self._lock:
                self._mine.discard(job.id)
                self._held.discard(job.id)
                self._lost.discard(job.id)

    def _fail(self, job: Job, reason: str) -> None:
        try:
            self.store().jobs.finish(job.id, self.runner, reason)
        except StoreError as e:  # left running, its lease not renewed: taken over when it runs out
            log.warning("ingestion job %s: could not record its failure: %s", job.id, e)

    def _tries(self, job: Job) -> None:
        """Run the job's pending files, then end it; after a ``StoreError`` (a dropped
        connection: the next statement connects again) go on from its first file without a
        result, until ``STORE_TRIES`` errors in a row with no file done between them."""
        recorded: list[int] = []
        errors = 0
        while True:
            before = len(recorded)
            try:
                ran, error = self._files(job, recorded)
                if ran:
                    self.store().jobs.finish(job.id, self.runner, error)
                return
            except StoreError as e:
                errors = 1 if len(recorded) > before else errors + 1
                if errors >= STORE_TRIES:
                    raise
                log.warning("ingestion job %s: %s; going on from its first file left", job.id, e)
            if self._stop.wait(STORE_WAIT_S):  # stopping: the job is released, not failed
                return

    def _files(self, job: Job, recorded: list[int]) -> tuple[bool, str | None]:
        """Run the job's pending files (each one's ordinal added to ``recorded`` once its
        result is): whether the job ended (False when this process stopped or no longer runs
        it), and why it failed if it did."""
        store = self.store()
        for ordinal, filename in store.jobs.pending_files(job.id):
            if self._stop.is_set() or job.id in self._lost:
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
            recorded.append(ordinal)
        return True, None

    def _ingest(self, kb: KnowledgeBase, filename: str, data: bytes) -> FileResult | None:
        """One file, waiting for a lane while the tenant's are full; None if stopped meanwhile."""
        while not self._stop.is_set():
            try:
                return self.ingest(kb, filename, data)
            except BusyError:
                self._stop.wait(BUSY_WAIT_S)
        return None
