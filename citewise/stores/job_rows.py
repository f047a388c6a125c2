"""``store.jobs``: ingestion jobs of the HTTP service and the console (tables of migrations
m012_jobs and m013_job_leases).

A job is one row of ``jobs`` and one row of ``job_files`` per uploaded file, in upload order.
A file's bytes wait in its row (``content``) until its result is recorded; recording the
result clears them in the same transaction, so a job's pending files are exactly the rows
without a result, and a finished job keeps only its results. A job is read by its public id
within one tenant: another tenant's reads exactly like a missing one.

Who runs a job is its ``runner`` (one token per process) and for how long its ``lease_until``
(migration m013), in seconds by the database's clock (``dialect.clock``), so processes on hosts
whose clocks differ agree on it. ``claim`` is one ``UPDATE`` that takes a job only if it is
queued, or running with its lease run out (or already this runner's): of runners claiming a job
at once exactly one gets it, and never one whose runner still renews its lease (``renew``). A
process that dies stops renewing; once the lease has run out any live process finds the job
among the ``claimable`` ones and takes it over. Every write of a job names the runner, so a
runner whose job was taken (its lease ran out while it stalled) stops at its next file.
``release`` gives up a stopping process's jobs at once: queued again, for the next runner.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from citewise.stores.database import Database, now

STATES = ("queued", "running", "done", "failed")
LEASE_S = 30.0  # how long a claim holds a job without being renewed, unless told otherwise
_COLUMNS = "id, public_id, tenant_id, kb_name, state, error, created_at, updated_at"


@dataclass(frozen=True)
class JobFile:
    """One uploaded file as a job keeps it: its bytes to ingest, or its result already (a file
    refused as it was received: a bad name, over the size limit)."""

    filename: str
    content: bytes | None
    result: dict[str, Any] | None = None


@dataclass(frozen=True)
class Job:
    id: str
    tenant_id: int
    kb: str
    state: str
    total: int
    done: int
    results: tuple[dict[str, Any], ...]  # the files' results so far, in upload order
    error: str | None
    created_at: str
    updated_at: str


class SQLJobs:
    def __init__(self, db: Database) -> None:
        self.db = db

    def create_job(self, tenant: int, kb: str, files: Iterable[JobFile]) -> Job:
        """A queued job of ``files``, read one at a time into its transaction."""
        public = secrets.token_hex(16)
        stamp = now()
        with self.db.transaction() as cur:
            key = self.db.insert_id(
                cur, "INSERT INTO jobs (public_id, tenant_id, kb_name, state, created_at, "
                "updated_at) VALUES (%s, %s, %s, 'queued', %s, %s)", (public, tenant, kb, stamp, stamp))
            for ordinal, f in enumerate(files):
                cur.execute("INSERT INTO job_files (job_id, ordinal, filename, content, result) "
                            "VALUES (%s, %s, %s, %s, %s)",
                            (key, ordinal, f.filename, f.content,
                             None if f.result is None else json.dumps(f.result)))
        job = self.get_job(public, tenant)
        assert job is not None
        return job

    def _row(self, public_id: str, tenant: int) -> tuple[Any, ...] | None:
        if not isinstance(public_id, str) or not public_id.isalnum() or len(public_id) > 64:
            return None
        rows = self.db.rows(f"SELECT {_COLUMNS} FROM jobs WHERE public_id = %s AND tenant_id = %s",
                            (public_id, tenant))
        return rows[0] if rows else None

    def get_job(self, public_id: str, tenant: int) -> Job | None:
        """The tenant's job of that id; None when missing or another tenant's."""
        row = self._row(public_id, tenant)
        if row is None:
            return None
        files = self.db.rows("SELECT result FROM job_files WHERE job_id = %s ORDER BY ordinal",
                             (row[0],))
        results = tuple(json.loads(r[0]) for r in files if r[0] is not None)
        return Job(row[1], int(row[2]), row[3], row[4], len(files), len(results), results,
                   row[5], row[6], row[7])

    def unfinished_jobs(self) -> list[Job]:
        """Every job queued or running, oldest first (what a server resumes at start-up)."""
        rows = self.db.rows("SELECT public_id, tenant_id FROM jobs WHERE state IN "
                            "('queued', 'running') ORDER BY id")
        jobs = [self.get_job(r[0], int(r[1])) for r in rows]
        return [j for j in jobs if j is not None]

    def claimable(self, operator: bool) -> list[tuple[str, int]]:
        """The ids and tenants of the jobs a runner may claim, oldest first: queued, or running
        with their lease run out; the operator's (tenant 0), or else the tenants'."""
        rows = self.db.rows(
            "SELECT public_id, tenant_id FROM jobs WHERE (state = 'queued' OR (state = 'running' "
            f"AND lease_until <= {self.db.dialect.clock})) AND tenant_id {'=' if operator else '<>'} 0 "
            "ORDER BY id")
        return [(r[0], int(r[1])) for r in rows]

    def claim(self, public_id: str, runner: str, lease_s: float = LEASE_S) -> bool:
        """Make ``runner`` the job's runner for ``lease_s`` seconds, its state running; False
        if it is finished, or another runner holds its lease."""
        with self.db.transaction() as cur:
            clock = self.db.dialect.clock
            cur.execute("UPDATE jobs SET runner = %s, state = 'running', updated_at = %s, "
                        f"lease_until = {clock} + %s WHERE public_id = %s AND (state = 'queued' "
                        f"OR (state = 'running' AND (runner = %s OR lease_until <= {clock})))",
                        (runner, now(), lease_s, public_id, runner))
            return cur.rowcount > 0

    def renew(self, public_id: str, runner: str, lease_s: float) -> bool:
        """The job's lease for ``lease_s`` seconds from now; False when ``runner`` no longer
        runs the job (it was taken over, released or finished)."""
        with self.db.transaction() as cur:
            cur.execute(f"UPDATE jobs SET lease_until = {self.db.dialect.clock} + %s "
                        "WHERE public_id = %s AND runner = %s AND state = 'running'",
                        (lease_s, public_id, runner))
            return cur.rowcount > 0

    def release(self, runner: str) -> None:
        """Every job ``runner`` runs, queued again for the next runner (its process stops)."""
        with self.db.transaction() as cur:
            cur.execute("UPDATE jobs SET state = 'queued', lease_until = 0, updated_at = %s "
                        "WHERE runner = %s AND state = 'running'", (now(), runner))

    def pending_files(self, public_id: str) -> list[tuple[int, str]]:
        """The ordinals and names of the files without a result, in upload order."""
        return [(int(r[0]), r[1]) for r in self.db.rows(
            "SELECT f.ordinal, f.filename FROM job_files f JOIN jobs j ON j.id = f.job_id "
            "WHERE j.public_id = %s AND f.result IS NULL ORDER BY f.ordinal", (public_id,))]

    def file_content(self, public_id: str, ordinal: int) -> bytes | None:
        rows = self.db.rows(
            "SELECT f.content FROM job_files f JOIN jobs j ON j.id = f.job_id "
            "WHERE j.public_id = %s AND f.ordinal = %s", (public_id, ordinal))
        return bytes(rows[0][0]) if rows and rows[0][0] is not None else None

    def record_file(self, public_id: str, runner: str, ordinal: int, result: dict[str, Any]) -> bool:
        """A file's result, its bytes dropped; False (and nothing written) when ``runner`` no
        longer runs the job."""
        with self.db.transaction() as cur:
            job_id = self._held(cur, public_id, runner)
            if job_id is None:
                return False
            cur.execute("UPDATE job_files SET result = %s, content = NULL "
                        "WHERE job_id = %s AND ordinal = %s", (json.dumps(result), job_id, ordinal))
            cur.execute("UPDATE jobs SET updated_at = %s WHERE id = %s", (now(), job_id))
        return True

    def finish(self, public_id: str, runner: str, error: str | None = None) -> bool:
        """Done, or failed with ``error``: the bytes of files never run are dropped. False
        when ``runner`` no longer runs the job."""
        state = "done" if error is None else "failed"
        with self.db.transaction() as cur:
            job_id = self._held(cur, public_id, runner)
            if job_id is None:
                return False
            cur.execute("UPDATE job_files SET content = NULL WHERE job_id = %s", (job_id,))
            cur.execute("UPDATE jobs SET state = %s, error = %s, updated_at = %s WHERE id = %s",
                        (state, error, now(), job_id))
        return True

    def _held(self, cur: Any, public_id: str, runner: str) -> int | None:
        """The job's row id, locked for this transaction, while ``runner`` runs it; else None."""
        cur.execute(f"SELECT id FROM jobs WHERE public_id = %s AND runner = %s "
                    f"AND state = 'running'{self.db.dialect.lock}", (public_id, runner))
        row = cur.fetchone()
        return None if row is None else int(row[0])
