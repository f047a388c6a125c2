"""Ingestion jobs under leases (``citewise/ingest/jobs.py``), two runners on one SQLite store in one
process: a runner's heartbeat keeps its job while it lives, a runner that stops releases its
job to the other at once, a store error on a file (a dropped connection) is tried again, and a
job whose runner lost the store goes on once it is back. The same with processes killed at
random points: ``test_job_crash.py``; with connections dropped too: ``test_chaos.py``."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from citewise.engine import Engine
from citewise.errors import StoreError
from citewise.ingest.jobs import STORE_TRIES, JobRunner, ThreadStores
from citewise.ingest.uploaded import FileResult, store_file
from citewise.kb import KnowledgeBase
from citewise.stores import open_store
from citewise.stores.job_rows import Job, JobFile, SQLJobs
from citewise.stores.roles import Store

pytestmark = pytest.mark.heavy  # servers, processes, deadlines or megabytes: make test, not make unit

TENANT = 5
Hook = Callable[[str, str], None]  # before each file: the runner's name, the file's


@contextmanager
def runner(url: str, name: str, lease_s: float, hook: Hook | None = None) -> Iterator[JobRunner]:
    """A server's job runner on ``url``, watching for the tenants' jobs."""
    stores = ThreadStores(url)

    def ingest(kb: KnowledgeBase, filename: str, data: bytes) -> FileResult:
        if hook is not None:
            hook(name, filename)
        return store_file(kb, filename, filename, data,
                          lambda kb, doc: Engine(stores()).ingest(kb, [doc]))[0]

    jobs = JobRunner(stores, ingest, threads=1, lease_s=lease_s)
    jobs.resume()
    try:
        yield jobs
    finally:
        jobs.close()
        stores.close()


@pytest.fixture
def url(tmp_path: Path) -> Iterator[str]:
    url = f"sqlite:///{tmp_path}/jobs.db"
    store = open_store(url)
    Engine(store).create_kb("docs", "hashing:64", tenant=TENANT)
    store.close()
    yield url


def files(*names: str) -> list[JobFile]:
    return [JobFile(n, f"# {n}\n\nThe text of {n}, kept for the job.\n".encode()) for n in names]


def wait_for(store: Store, job: Job, states: tuple[str, ...], timeout: float = 20) -> Job:
    deadline = time.monotonic() + timeout
    while True:
        now = store.jobs.get_job(job.id, TENANT)
        assert now is not None
        if now.state in states or time.monotonic() > deadline:
            return now
        time.sleep(0.05)


def test_a_runner_keeps_its_job_by_its_heartbeat_while_it_lives(url: str) -> None:
    ran: list[tuple[str, str]] = []

    def slow(name: str, filename: str) -> None:
        ran.append((name, filename))
        time.sleep(1.5)  # each file three of the runners' leases

    with runner(url, "a", 0.5, slow) as a, runner(url, "b", 0.5, slow):
        store = open_store(url)
        try:
            job = store.jobs.create_job(TENANT, "docs", files("one.md", "two.md"))
            a.submit(job)
            done = wait_for(store, job, ("done", "failed"))
        finally:
            store.close()
    assert done.state == "done" and [r["status"] for r in done.results] == ["added", "added"]
    assert len(ran) == 2 and len({name for name, _ in ran}) == 1  # one runner ran both files


def test_a_runner_that_stops_releases_its_job_to_another_at_once(url: str) -> None:
    started, go_on = threading.Event(), threading.Event()

    def first_waits(name: str, filename: str) -> None:
        if name == "a":
            started.set()
            go_on.wait(10)

    store = open_store(url)
    try:
        job = store.jobs.create_job(TENANT, "docs", files("one.md", "two.md", "three.md"))
        with runner(url, "a", 30, first_waits) as a:
            a.submit(job)
            assert started.wait(10)
            threading.Timer(0.2, go_on.set).start()
        # a stopped after its current file, its lease given up: queued for the next runner
        left = store.jobs.get_job(job.id, TENANT)
        assert left is not None and (left.state, left.done) == ("queued", 1)
        with runner(url, "b", 30, first_waits):  # a lease of 30 s: b takes it at once
            done = wait_for(store, job, ("done", "failed"), timeout=10)
    finally:
        store.close()
    assert done.state == "done" and [r["status"] for r in done.results] == ["added"] * 3


def test_a_store_error_on_a_file_is_tried_again_not_the_jobs_failure(url: str) -> None:
    tried: list[str] = []

    def dropped_once(name: str, filename: str) -> None:  # a connection the database dropped
        tried.append(filename)
        if tried.count("two.md") == 1 and filename == "two.md":
            raise StoreError("write failed and was rolled back: (2013, 'Lost connection')")

    store = open_store(url)
    try:
        with runner(url, "a", 30, dropped_once) as a:  # no lease runs out: its own thread goes on
            job = store.jobs.create_job(TENANT, "docs", files("one.md", "two.md", "three.md"))
            a.submit(job)
            done = wait_for(store, job, ("done", "failed"), timeout=10)
    finally:
        store.close()
    assert done.state == "done" and [r["status"] for r in done.results] == ["added"] * 3
    assert tried == ["one.md", "two.md", "two.md", "three.md"]


def test_a_job_whose_runner_lost_the_store_goes_on_once_it_is_back(
        url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    down = threading.Event()
    finish = SQLJobs.finish
    tries = 0

    def store_down(name: str, filename: str) -> None:
        nonlocal tries
        if filename == "two.md" and tries < STORE_TRIES:  # down for as long as a job tries
            tries += 1
            down.set()
            raise StoreError("the store went away")

    def cannot_finish(self: SQLJobs, *args: object, **kw: object) -> bool:
        if down.is_set() and not getattr(cannot_finish, "once", False):
            cannot_finish.once = True  # type: ignore[attr-defined]
            raise StoreError("the store is still away")  # the job's failure is not recorded
        return finish(self, *args, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(SQLJobs, "finish", cannot_finish)
    store = open_store(url)
    try:
        with runner(url, "a", 0.5, store_down) as a:
            job = store.jobs.create_job(TENANT, "docs", files("one.md", "two.md", "three.md"))
            a.submit(job)
            done = wait_for(store, job, ("done", "failed"), timeout=15)
    finally:
        store.close()
    assert done.state == "done" and [r["status"] for r in done.results] == ["added"] * 3
