"""The console's Upload page through Streamlit's AppTest: files become an ingestion job of the
store (the job rows the HTTP service keeps), run by the console process and polled to each
file's result; a bad file is rejected on its own; a job a stopped console left is resumed."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from citewise.stores.job_rows import JobFile
from citewise.stores.sqlite import open_sqlite
from tests.helpers import sample_sqlite

pytestmark = pytest.mark.heavy  # servers, processes, deadlines or megabytes: make test, not make unit

CONSOLE = str(Path(__file__).resolve().parent.parent / "citewise" / "ui" / "console.py")
SAFFRON = (b"# Saffron harvest\n\nSaffron is harvested by hand from the crocus flower in autumn; "
           b"each flower gives three red stigmas.\n")
VIOLET = b"# Violet\n\nViolet dust settles on the old library shelves every autumn.\n"


@pytest.fixture
def db(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "console.db"
    sample_sqlite(path)
    monkeypatch.setenv("CITEWISE_DB", str(path))
    return path


def upload_page() -> AppTest:
    at = AppTest.from_file(CONSOLE, default_timeout=60).run()
    return at.sidebar.radio(key="page").set_value("Upload").run()


def upload(at: AppTest, *files: tuple[str, bytes, str]) -> AppTest:
    at.file_uploader[0].set_value(list(files))
    return at.run().button(key="upload").click().run()


def finished(at: AppTest, timeout: float = 60) -> AppTest:
    """Run the page again (as its polling does) until a job says it is done or stopped."""
    deadline = time.monotonic() + timeout
    while not at.success and not any("The job stopped" in e.value for e in at.error):
        assert time.monotonic() < deadline, [e.value for e in at.error]
        time.sleep(0.2)
        at = at.run()
    return at


def documents(db: Path, kb: str) -> list[str]:
    store = open_sqlite(db)
    try:
        return [d.doc_id for d in store.list_documents(store.get_kb(kb))]
    finally:
        store.close()


def jobs_of(db: Path) -> list:
    store = open_sqlite(db)
    try:
        ids = [r[0] for r in store.db.rows("SELECT public_id FROM jobs ORDER BY id")]
        return [store.jobs.get_job(i, 0) for i in ids]
    finally:
        store.close()


def test_a_bad_file_is_rejected_with_its_reason_and_the_good_ones_are_stored(db: Path) -> None:
    at = upload(upload_page(), ("saffron.md", SAFFRON, "text/markdown"),
                ("broken.pdf", b"not a pdf at all", "application/pdf"),
                ("violet.md", VIOLET, "text/markdown"))
    assert not at.exception
    at = finished(at)
    assert at.success[0].value.startswith("Done: 2 of 3 documents stored in smoking, 1 rejected")
    errors = [e.value.replace("\\", "") for e in at.error]
    assert len(errors) == 1 and errors[0].startswith("broken.pdf: not a readable PDF file")
    assert "A rejected file changed nothing stored" in at.info[0].value
    table = at.dataframe[0].value
    assert list(zip(table["filename"], table["status"], strict=True)) == [
        ("saffron.md", "added"), ("broken.pdf", "rejected"), ("violet.md", "added")]
    assert {"saffron.md", "violet.md"} <= set(documents(db, "smoking"))
    assert "broken.pdf" not in documents(db, "smoking")
    # the job rows the HTTP service reads: the operator's own (tenant 0), done, per file
    (job,) = jobs_of(db)
    assert (job.kb, job.state, job.done, job.total) == ("smoking", "done", 3, 3)
    assert [r["status"] for r in job.results] == ["added", "rejected", "added"]


def test_an_upload_can_create_a_knowledge_base_with_a_checked_name(db: Path) -> None:
    at = upload_page()
    at.selectbox(key="upload-kb").set_value("(a new knowledge base)").run()
    at.text_input(key="new-kb-name").input("../spices")
    at.text_input(key="new-kb-embedder").input("hashing:256")
    at = upload(at, ("saffron.md", SAFFRON, "text/markdown"))
    assert at.error and "spices" in at.error[0].value and not at.success
    assert jobs_of(db) == []  # refused before any job or knowledge base was made
    at.text_input(key="new-kb-name").input("spices")
    at = finished(upload(at, ("saffron.md", SAFFRON, "text/markdown")))
    assert "stored in spices" in at.success[0].value
    assert documents(db, "spices") == ["saffron.md"]
    at.selectbox(key="upload-kb").set_value("(a new knowledge base)").run()
    at.text_input(key="new-kb-name").input("spices")
    at = upload(at, ("violet.md", VIOLET, "text/markdown"))
    assert "already exists" in at.error[0].value


def test_the_upload_limits_are_the_http_services(db: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from citewise.api.settings import get_settings

    monkeypatch.setenv("CITEWISE_MAX_UPLOAD_BYTES", "64")
    monkeypatch.setenv("CITEWISE_MAX_FILES", "2")
    get_settings.cache_clear()
    try:
        at = upload(upload_page(), ("a.md", VIOLET, "text/markdown"),
                    ("b.md", b"# B\n\nshort", "text/markdown"), ("c.md", b"# C", "text/markdown"))
        assert "3 files in one upload; the limit is 2" in at.error[0].value
        at = finished(upload(at, ("a.md", VIOLET, "text/markdown"),
                             ("b.md", b"# B\n\nBees hum.", "text/markdown")))
        assert [e.value for e in at.error] == ["a\\.md: over the upload limit of 64 bytes"]
    finally:
        get_settings.cache_clear()


def test_a_job_left_by_a_stopped_console_is_resumed_and_shown_as_such(db: Path) -> None:
    store = open_sqlite(db)
    try:  # what a console stopped after the job's first file left
        job = store.jobs.create_job(0, "smoking", [JobFile("saffron.md", SAFFRON),
                                                   JobFile("violet.md", VIOLET)])
        assert store.jobs.claim(job.id, "gone-console")
        assert store.jobs.record_file(job.id, "gone-console", 0, {
            "filename": "saffron.md", "doc_id": "saffron.md", "status": "added", "chunks": 1,
            "reason": None})
        store.jobs.release("gone-console")  # as a console stopping gives up its jobs
    finally:
        store.close()
    at = finished(upload_page())
    assert any("Resumed" in c.value for c in at.caption)
    assert at.subheader[0].value == f"Job {job.id[:8]} into smoking"
    assert at.success[0].value.startswith("Done: 2 of 2 documents stored in smoking")
    assert "violet.md" in documents(db, "smoking")
    assert "saffron.md" not in documents(db, "smoking")  # its result was kept, not run again
