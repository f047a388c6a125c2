"""Ingestion jobs over HTTP: an upload answers 202 with a job at once, the job is polled to
its per-file results, another tenant's key cannot see it, and a job left by a stopped server is
run by the next one."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from citewise.api.job_runner import JobRunner
from citewise.engine import Engine
from citewise.stores import open_store
from citewise.stores.job_rows import JobFile
from tests.api_fixtures import ADMIN_KEY, TenantKey, make_app, settings_for, tenant

NOTES = b"# Saffron\n\nSaffron comes from the crocus flower and is harvested by hand.\n"
MORE = b"# Violet\n\nViolet dust settles on the old library shelves every autumn.\n"


def poll(client: TestClient, who: TenantKey, job_id: str, timeout: float = 60) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        r = client.get(f"/v1/jobs/{job_id}", headers=who.headers)
        assert r.status_code == 200, r.text
        if r.json()["state"] in ("done", "failed") or time.monotonic() > deadline:
            return r.json()
        time.sleep(0.05)


def new_kb(client: TestClient, name: str) -> TenantKey:
    who = tenant(client, name)
    assert client.post("/v1/kbs", json={"name": "docs"}, headers=who.headers).status_code == 201
    return who


def test_an_upload_is_a_job_polled_to_its_per_file_results(tmp_path: Path) -> None:
    with TestClient(make_app(settings_for(tmp_path / "j.db"))) as client:
        acme = new_kb(client, "acme")
        files = [("files", ("notes.md", NOTES)), ("files", ("bad.exe", b"MZ")),
                 ("files", ("more.md", MORE))]
        r = client.post("/v1/kbs/docs/documents", headers=acme.headers, files=files)
        assert r.status_code == 202, r.text
        job = r.json()
        assert r.headers["location"] == f"/v1/jobs/{job['id']}"
        assert job["kb"] == "docs" and job["documents_total"] == 3
        assert job["state"] in ("queued", "running", "done")
        done = poll(client, acme, job["id"])
        assert (done["state"], done["documents_done"], done["error"]) == ("done", 3, None)
        assert [(f["filename"], f["status"]) for f in done["files"]] == [
            ("notes.md", "added"), ("bad.exe", "rejected"), ("more.md", "added")]
        assert "unsupported file type .exe" in done["files"][1]["reason"]
        assert done["files"][0]["chunks"] >= 1
        # the same objects a synchronous upload returns
        again = client.post("/v1/kbs/docs/documents?wait=true", headers=acme.headers, files=files)
        assert again.status_code == 200
        assert [(f["filename"], f["status"]) for f in again.json()["files"]] == [
            ("notes.md", "unchanged"), ("bad.exe", "rejected"), ("more.md", "unchanged")]
        assert {k: v for k, v in again.json()["files"][1].items()} == done["files"][1]
        docs = client.get("/v1/kbs/docs/documents", headers=acme.headers).json()
        assert [d["doc_id"] for d in docs] == ["more.md", "notes.md"]


def test_another_tenants_job_reads_exactly_like_a_missing_one(tmp_path: Path) -> None:
    with TestClient(make_app(settings_for(tmp_path / "j.db"))) as client:
        acme, other = new_kb(client, "acme"), new_kb(client, "other")
        r = client.post("/v1/kbs/docs/documents", headers=acme.headers,
                        files=[("files", ("notes.md", NOTES))])
        job_id = r.json()["id"]
        theirs = client.get(f"/v1/jobs/{job_id}", headers=other.headers)
        nowhere = client.get(f"/v1/jobs/{'0' * 32}", headers=other.headers)
        assert theirs.status_code == nowhere.status_code == 404
        assert theirs.json()["detail"] == nowhere.json()["detail"].replace("0" * 32, job_id)
        assert "notes" not in theirs.text
        assert client.get(f"/v1/jobs/{job_id}").status_code == 401
        assert poll(client, acme, job_id)["state"] == "done"


def test_a_job_left_by_a_stopped_server_is_run_by_the_next(tmp_path: Path, monkeypatch) -> None:
    settings = settings_for(tmp_path / "j.db")
    with monkeypatch.context() as m:  # the first server stops before it runs the job
        m.setattr(JobRunner, "submit", lambda self, job: None)
        with TestClient(make_app(settings)) as client:
            acme = new_kb(client, "acme")
            r = client.post("/v1/kbs/docs/documents", headers=acme.headers,
                            files=[("files", ("notes.md", NOTES)), ("files", ("more.md", MORE))])
            assert r.status_code == 202
            job_id = r.json()["id"]
            assert client.get(f"/v1/jobs/{job_id}", headers=acme.headers).json()["state"] == "queued"
    with TestClient(make_app(settings)) as client:  # started again: it resumes the job
        done = poll(client, acme, job_id)
        assert (done["state"], done["documents_done"], done["documents_total"]) == ("done", 2, 2)
        assert [f["status"] for f in done["files"]] == ["added", "added"]
        hits = client.post("/v1/kbs/docs/search", json={"query": "crocus saffron"},
                           headers=acme.headers).json()
        assert "notes.md" in str(hits)


def test_a_resumed_job_whose_knowledge_base_is_gone_fails_and_says_why(tmp_path: Path) -> None:
    settings = settings_for(tmp_path / "j.db")
    with TestClient(make_app(settings)) as client:
        acme = new_kb(client, "acme")
        assert client.delete("/v1/kbs/docs", headers=acme.headers).status_code == 204
    store = open_store(settings.db)
    try:  # what a server stopped in the middle of the job left: running, one file done
        tenant_id = store.tenants.get_tenant("acme").id
        job = store.jobs.create_job(tenant_id, "docs", [JobFile("a.md", NOTES), JobFile("b.md", MORE)])
        assert store.jobs.claim(job.id, "gone-process")
        assert store.jobs.record_file(job.id, "gone-process", 0, {
            "filename": "a.md", "doc_id": "a.md", "status": "added", "chunks": 1, "reason": None})
        store.jobs.release("gone-process")  # as a server stopping gives up its jobs
    finally:
        store.close()
    with TestClient(make_app(settings)) as client:
        failed = poll(client, acme, job.id)
        assert failed["state"] == "failed" and failed["error"] == "knowledge base 'docs' no longer exists"
        assert (failed["documents_done"], failed["documents_total"]) == (1, 2)


@pytest.mark.parametrize("query", ["", "?wait=false"])
def test_a_job_keeps_the_upload_checks(tmp_path: Path, query: str) -> None:
    with TestClient(make_app(settings_for(tmp_path / "j.db", max_upload_bytes=64))) as client:
        acme = new_kb(client, "acme")
        r = client.post(f"/v1/kbs/docs/documents{query}", headers=acme.headers,
                        files=[("files", ("big.md", NOTES)), ("files", ("a/b.md", b"x"))])
        assert r.status_code == 202
        done = poll(client, acme, r.json()["id"])
        assert [f["reason"] for f in done["files"]] == [
            "over the upload limit of 64 bytes",
            "the file name holds a folder; send the file's own name only"]
        r = client.post(f"/v1/kbs/docs/documents{query}", headers=acme.headers, data={"x": "1"})
        assert r.status_code == 422
        assert client.post(f"/v1/kbs/nowhere/documents{query}", headers=acme.headers,
                           files=[("files", ("a.md", NOTES))]).status_code == 404


def test_a_job_stopped_half_way_goes_on_from_its_first_file_without_a_result(
        tmp_path: Path) -> None:
    settings = settings_for(tmp_path / "j.db")
    with TestClient(make_app(settings)) as client:
        acme = new_kb(client, "acme")
    first = {"filename": "a.md", "doc_id": "a.md", "status": "added", "chunks": 1, "reason": None}
    store = open_store(settings.db)
    try:  # what a server stopped after the job's first file left
        job = store.jobs.create_job(store.tenants.get_tenant("acme").id, "docs",
                                    [JobFile("a.md", NOTES), JobFile("b.md", MORE)])
        assert store.jobs.claim(job.id, "gone-process")
        assert store.jobs.record_file(job.id, "gone-process", 0, first)
        store.jobs.release("gone-process")  # as a server stopping gives up its jobs
    finally:
        store.close()
    with TestClient(make_app(settings)) as client:
        done = poll(client, acme, job.id)
        assert done["state"] == "done" and done["files"][0] == first
        assert [f["status"] for f in done["files"]] == ["added", "added"]
        docs = client.get("/v1/kbs/docs/documents", headers=acme.headers).json()
        assert [d["doc_id"] for d in docs] == ["b.md"]  # a.md's result was recorded, not rerun


def test_a_jobs_files_run_in_its_tenants_compute_lanes(tmp_path: Path, monkeypatch) -> None:
    from citewise.api.compute import FairCompute

    held: list[int] = []
    hold = FairCompute.hold

    def recorded(self: FairCompute, tenant: int):
        held.append(tenant)
        return hold(self, tenant)

    monkeypatch.setattr(FairCompute, "hold", recorded)
    with TestClient(make_app(settings_for(tmp_path / "j.db"))) as client:
        acme = new_kb(client, "acme")
        tenant_id = next(t["id"] for t in client.get(
            "/v1/admin/tenants", headers={"Authorization": f"Bearer {ADMIN_KEY}"}).json()
            if t["name"] == "acme")
        held.clear()
        r = client.post("/v1/kbs/docs/documents", headers=acme.headers,
                        files=[("files", ("notes.md", NOTES)), ("files", ("more.md", MORE))])
        assert poll(client, acme, r.json()["id"])["state"] == "done"
        assert held == [tenant_id, tenant_id]


@pytest.mark.heavy
def test_a_job_waits_for_a_lane_while_its_tenants_are_busy(tmp_path: Path) -> None:
    settings = settings_for(tmp_path / "j.db", tenant_slots=1, tenant_queue=0)
    app = make_app(settings)
    with TestClient(app) as client:
        acme = new_kb(client, "acme")
        services = app.state.services[settings.db]
        tenant_id = services.store().tenants.get_tenant("acme").id
        with services.compute.hold(tenant_id):  # the tenant's one lane, taken by another request
            r = client.post("/v1/kbs/docs/documents", headers=acme.headers,
                            files=[("files", ("notes.md", NOTES))])
            assert r.status_code == 202
            time.sleep(1.5)
            waiting = client.get(f"/v1/jobs/{r.json()['id']}", headers=acme.headers).json()
            assert (waiting["state"], waiting["documents_done"]) == ("running", 0)
        done = poll(client, acme, r.json()["id"])
        assert [f["status"] for f in done["files"]] == ["added"]


def test_a_server_resumes_the_tenants_jobs_and_leaves_the_consoles(tmp_path: Path) -> None:
    settings = settings_for(tmp_path / "j.db")
    with TestClient(make_app(settings)) as client:
        acme = new_kb(client, "acme")
    store = open_store(settings.db)
    try:  # a console's job (the operator's, tenant 0) and a tenant's, both left unfinished
        Engine(store).open_kb("own", embedder="hashing:256")
        own = store.jobs.create_job(0, "own", [JobFile("a.md", NOTES)])
        theirs = store.jobs.create_job(store.tenants.get_tenant("acme").id, "docs",
                                       [JobFile("b.md", MORE)])
    finally:
        store.close()
    with TestClient(make_app(settings)) as client:
        assert poll(client, acme, theirs.id)["state"] == "done"
    store = open_store(settings.db)
    try:  # still queued, for the next console; no file of it was run
        assert (store.jobs.get_job(own.id, 0).state, store.jobs.get_job(own.id, 0).done) == (
            "queued", 0)
    finally:
        store.close()


@pytest.mark.heavy
def test_a_running_server_runs_a_job_queued_by_a_process_that_died_before_running_it(
        tmp_path: Path) -> None:
    settings = settings_for(tmp_path / "j.db", job_lease_s=1, rate_per_minute=10_000)
    with TestClient(make_app(settings)) as client:
        acme = new_kb(client, "acme")
        store = open_store(settings.db)
        try:  # another server wrote the job, then died before its thread claimed it
            job = store.jobs.create_job(store.tenants.get_tenant("acme").id, "docs",
                                        [JobFile("a.md", NOTES)])
        finally:
            store.close()
        done = poll(client, acme, job.id, timeout=10)
        assert (done["state"], [f["status"] for f in done["files"]]) == ("done", ["added"])


@pytest.mark.heavy
def test_a_running_server_takes_over_a_job_whose_runners_lease_ran_out(tmp_path: Path) -> None:
    settings = settings_for(tmp_path / "j.db", job_lease_s=1, rate_per_minute=10_000)
    first = {"filename": "a.md", "doc_id": "a.md", "status": "added", "chunks": 1, "reason": None}
    with TestClient(make_app(settings)) as client:
        acme = new_kb(client, "acme")
        store = open_store(settings.db)
        try:  # another server ran the job's first file, then died (SIGKILL, power, network)
            job = store.jobs.create_job(store.tenants.get_tenant("acme").id, "docs",
                                        [JobFile("a.md", NOTES), JobFile("b.md", MORE)])
            assert store.jobs.claim(job.id, "dead-process", 2)
            assert store.jobs.record_file(job.id, "dead-process", 0, first)
            time.sleep(1)
            running = store.jobs.get_job(job.id, job.tenant_id)
            assert running is not None and (running.state, running.done) == ("running", 1)
        finally:
            store.close()
        done = poll(client, acme, job.id, timeout=10)
        assert done["state"] == "done" and done["files"][0] == first
        assert [f["status"] for f in done["files"]] == ["added", "added"]
