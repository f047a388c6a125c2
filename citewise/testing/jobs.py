"""``JobConformance``: ``store.jobs``, the ingestion jobs of the HTTP service."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

from citewise.stores.job_rows import JobFile
from citewise.stores.roles import Store
from citewise.testing.helpers import Conformance

REFUSED = {"filename": "x.exe", "doc_id": None, "status": "rejected", "chunks": 0,
           "reason": "unsupported file type .exe"}


def _added(name: str) -> dict:
    return {"filename": name, "doc_id": name, "status": "added", "chunks": 1, "reason": None}


class JobConformance(Conformance):
    def test_a_job_keeps_its_files_until_each_result_and_reads_only_in_its_tenant(
            self, store: Store) -> None:
        jobs = store.jobs
        data = bytes(range(256)) * 3  # any bytes, NUL included, kept exactly
        job = jobs.create_job(7, "docs", [JobFile("a.md", b"# A\n\none"), JobFile("x.exe", None, REFUSED),
                                          JobFile("b.pdf", data)])
        assert (job.state, job.total, job.done, job.results, job.kb) == ("queued", 3, 1, (REFUSED,), "docs")
        assert len(job.id) == 32 and job.error is None
        assert jobs.get_job(job.id, 8) is None and jobs.get_job("nope", 7) is None
        assert jobs.get_job(job.id + "'", 7) is None
        assert [j.id for j in jobs.unfinished_jobs()] == [job.id]
        assert jobs.pending_files(job.id) == [(0, "a.md"), (2, "b.pdf")]
        assert jobs.file_content(job.id, 2) == data
        assert not jobs.record_file(job.id, "r1", 0, _added("a.md"))  # not claimed: nothing written
        assert jobs.claim(job.id, "r1")
        running = jobs.get_job(job.id, 7)
        assert running is not None and running.state == "running"
        assert jobs.record_file(job.id, "r1", 0, _added("a.md"))
        assert jobs.file_content(job.id, 0) is None and jobs.pending_files(job.id) == [(2, "b.pdf")]
        running = jobs.get_job(job.id, 7)
        assert running is not None and running.done == 2
        assert running.results == (_added("a.md"), REFUSED)

        assert jobs.renew(job.id, "r1", 0)  # r1's process died: its lease ran out
        assert jobs.claim(job.id, "r2")  # another process took the job over
        assert not jobs.record_file(job.id, "r1", 2, _added("b.pdf"))
        assert not jobs.finish(job.id, "r1")
        assert jobs.record_file(job.id, "r2", 2, _added("b.pdf")) and jobs.finish(job.id, "r2")
        done = jobs.get_job(job.id, 7)
        assert done is not None and (done.state, done.done, done.total) == ("done", 3, 3)
        assert [r["filename"] for r in done.results] == ["a.md", "x.exe", "b.pdf"]
        assert not jobs.claim(job.id, "r3") and jobs.unfinished_jobs() == []

    def test_a_failed_job_says_why_and_drops_the_bytes_never_run(self, store: Store) -> None:
        jobs = store.jobs
        first = jobs.create_job(1, "docs", [JobFile("a.md", b"a"), JobFile("b.md", b"b")])
        second = jobs.create_job(2, "docs", [JobFile("c.md", b"c")])
        assert [j.id for j in jobs.unfinished_jobs()] == [first.id, second.id]
        assert jobs.claim(first.id, "r") and jobs.finish(first.id, "r", "the store is unavailable")
        failed = jobs.get_job(first.id, 1)
        assert failed is not None and (failed.state, failed.error, failed.done) == (
            "failed", "the store is unavailable", 0)
        assert jobs.file_content(first.id, 0) is None and jobs.file_content(first.id, 1) is None
        assert [j.id for j in jobs.unfinished_jobs()] == [second.id]
        assert jobs.file_content(second.id, 0) == b"c"
        other = self.reopen(store)  # another worker sees the same jobs
        try:
            assert other.jobs.get_job(second.id, 2) == jobs.get_job(second.id, 2)
        finally:
            other.close()

    def test_a_lease_lets_one_runner_at_a_time_until_it_runs_out_or_is_released(
            self, store: Store) -> None:
        jobs = store.jobs
        job = jobs.create_job(7, "docs", [JobFile("a.md", b"a"), JobFile("b.md", b"b")])
        assert jobs.claim(job.id, "r1")
        assert not jobs.claim(job.id, "r2")  # r1 runs it: its lease holds
        assert jobs.claim(job.id, "r1")  # its own runner may claim it again
        assert jobs.claimable(operator=False) == [] == jobs.claimable(operator=True)
        assert jobs.renew(job.id, "r1", 30) and not jobs.renew(job.id, "r2", 30)
        assert jobs.renew(job.id, "r1", 0)  # r1 stops renewing (its process died): it runs out
        assert jobs.claimable(operator=False) == [(job.id, 7)] and jobs.claimable(operator=True) == []
        assert jobs.claim(job.id, "r2", 30)
        assert not jobs.renew(job.id, "r1", 30) and not jobs.record_file(job.id, "r1", 0, _added("a.md"))
        assert jobs.record_file(job.id, "r2", 0, _added("a.md")) and jobs.claimable(operator=False) == []
        jobs.release("r2")  # its process stops: the job waits for the next runner at once
        waiting = jobs.get_job(job.id, 7)
        assert waiting is not None and (waiting.state, waiting.done) == ("queued", 1)
        assert jobs.claimable(operator=False) == [(job.id, 7)]
        assert not jobs.renew(job.id, "r2", 30) and not jobs.finish(job.id, "r2")
        assert jobs.claim(job.id, "r3", 30) and jobs.record_file(job.id, "r3", 1, _added("b.md"))
        assert jobs.finish(job.id, "r3") and not jobs.renew(job.id, "r3", 30)
        assert not jobs.claim(job.id, "r3", 30) and jobs.claimable(operator=False) == []
        operators = jobs.create_job(0, "own", [JobFile("c.md", b"c")])
        assert jobs.claimable(operator=True) == [(operators.id, 0)]
        assert jobs.claimable(operator=False) == []

    def test_of_runners_claiming_one_job_at_once_exactly_one_wins(self, store: Store) -> None:
        job = store.jobs.create_job(3, "docs", [JobFile("a.md", b"a")])
        others = [self.reopen(store) for _ in range(6)]  # one process each
        start = threading.Barrier(len(others))

        def claim(n: int) -> bool:
            start.wait()
            return others[n].jobs.claim(job.id, f"r{n}")

        try:
            with ThreadPoolExecutor(len(others)) as pool:
                won = list(pool.map(claim, range(len(others))))
        finally:
            for other in others:
                other.close()
        assert won.count(True) == 1, won
        assert self.table(store, "SELECT runner FROM jobs") == [(f"r{won.index(True)}",)]
