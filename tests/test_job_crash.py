"""Ingestion jobs survive their runner's death without a restart: two server processes run the
tenants' jobs on one store (``tests/job_process.py``), and over 20 rounds the one running a
job is killed with SIGKILL at a random point (then started again). The other takes the job
over once its runner's lease runs out, from its first file without a result; in the end every
job is ``done`` with each file's result, and each file is stored exactly once."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from citewise.engine import Engine
from citewise.stores import open_store
from citewise.stores.job_rows import Job, JobFile
from citewise.stores.roles import Store
from citewise.testing.sql import rows as sql
from tests.servers import backends

ROUNDS, FILES, LEASE_S, TENANT = 20, 4, 1.0, 3
ROOT = Path(__file__).resolve().parent.parent

pytestmark = [pytest.mark.big, pytest.mark.timeout(1200)]


@dataclass
class Worker:
    process: subprocess.Popen[str]
    runner: str


def start(url: str, log: Path) -> Worker:
    """A server process (its environment this one's, PYTHONPATH included)."""
    with log.open("a") as err:
        process = subprocess.Popen([sys.executable, "-m", "tests.job_process", url, str(LEASE_S)],
                                   cwd=ROOT, stdout=subprocess.PIPE, stderr=err, text=True)
    assert process.stdout is not None
    runner = process.stdout.readline().strip()
    assert runner, f"a server process did not start: {log.read_text()[-2000:]}"
    return Worker(process, runner)


def text(round_no: int, file_no: int) -> bytes:
    body = "\n\n".join(f"Round {round_no} file {file_no} paragraph {p}: the heron waits by the "
                       f"reeds, number {round_no * 100 + file_no * 10 + p} of the pond."
                       for p in range(40))
    return f"# Round {round_no} file {file_no}\n\n{body}\n".encode()


def runner_of(store: Store, job: Job) -> str | None:
    got = sql(store, "SELECT runner FROM jobs WHERE public_id = %s", (job.id,))
    return got[0][0] if got else None


def state(store: Store, job: Job) -> Job:
    now = store.jobs.get_job(job.id, TENANT)
    assert now is not None
    return now


def until(what: Callable[[], Any], timeout: float, why: Callable[[], str]) -> Any:
    deadline = time.monotonic() + timeout
    while not (got := what()):
        assert time.monotonic() < deadline, why()
        time.sleep(0.02)
    return got


def ended(store: Store, job: Job, timeout: float = 30) -> Job:
    return until(lambda: (now := state(store, job)).state in ("done", "failed") and now, timeout,
                 lambda: f"the job never ended: {state(store, job)}")


@pytest.fixture(params=backends("sqlite", "mysql", "postgres"))
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path}/jobs.db"
        return
    fresh = request.getfixturevalue("mysql_database" if request.param == "mysql" else "pg_database")
    with fresh() as url:
        yield url


def test_sigkill_of_a_jobs_runner_leaves_it_to_the_other_process(store_url: str,
                                                                   tmp_path: Path) -> None:
    rng = random.Random(2812)
    log = tmp_path / "workers.log"
    store = open_store(store_url)
    kb = Engine(store).create_kb("docs", "hashing:64", tenant=TENANT)
    workers = [start(store_url, log), start(store_url, log)]
    jobs: list[Job] = []
    killed_at: list[int] = []  # files done when the runner was killed
    try:
        span = 0.5  # how long a job runs, measured on the first one (not killed)
        for round_no in range(ROUNDS + 1):
            job = store.jobs.create_job(TENANT, "docs", [
                JobFile(f"r{round_no}f{i}.md", text(round_no, i)) for i in range(FILES)])
            jobs.append(job)
            until(partial(runner_of, store, job), 10, lambda: "no process claimed the job")
            started = time.monotonic()
            if round_no == 0:
                ended(store, job)
                span = time.monotonic() - started
                continue
            time.sleep(rng.uniform(0, 1.2 * span))
            holder = runner_of(store, job)
            [victim] = [w for w in workers if w.runner == holder]
            killed_at.append(state(store, job).done)
            os.kill(victim.process.pid, signal.SIGKILL)
            assert victim.process.wait(10) == -signal.SIGKILL
            if victim.process.stdout is not None:
                victim.process.stdout.close()
            workers[workers.index(victim)] = start(store_url, log)
            ended(store, job)  # taken over once the lease ran out
        for n, job in enumerate(jobs):
            end = state(store, job)
            assert (end.state, end.done, end.total, end.error) == ("done", FILES, FILES, None)
            assert [r["doc_id"] for r in end.results] == [f"r{n}f{i}.md" for i in range(FILES)]
            assert {r["status"] for r in end.results} <= {"added", "unchanged"}
        # each file stored exactly once: one document and one set of chunks each
        docs = sorted(d.doc_id for d in store.list_documents(kb))
        assert docs == sorted(f"r{n}f{i}.md" for n in range(ROUNDS + 1) for i in range(FILES))
        per_doc = sql(store, "SELECT doc_id, count(*) FROM chunks WHERE kb_id = %s GROUP BY doc_id",
                      (kb.id,))
        assert len(per_doc) == len(docs) and len({n for _, n in per_doc}) == 1
    finally:
        for w in workers:
            w.process.kill()
            w.process.wait()
            if w.process.stdout is not None:
                w.process.stdout.close()
        store.close()
    assert len(set(killed_at)) >= 3, f"kills landed at too few points: {killed_at}"
