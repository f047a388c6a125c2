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


def finished(at: AppTest, timeout: float = 60, jobs: int = 1) -> AppTest:
    """Run the page again (as its polling does) until ``jobs`` jobs say they are done, or one
    stopped."""
    deadline = time.monotonic() + timeout
    while len(at.success) < jobs and not any("The job stopped" in e.value for e in at.error):
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
    assert at.success[0].value.startswith("Done: 2 of 3 files stored in smoking, 1 rejected")
    errors = [e.value.replace("\\", "") for e in at.error]
    assert len(errors) == 1 and errors[0].startswith("broken.pdf: not a readable PDF file")
    assert "A rejected file changed nothing stored" in at.info[0].value
    table = at.dataframe[0].value
    assert list(table.columns) == ["file", "result", "passages", "why"]
    assert list(zip(table["file"], table["result"], table["passages"], strict=True)) == [
        ("saffron.md", "stored (new)", "1"), ("broken.pdf", "rejected", "—"),
        ("violet.md", "stored (new)", "1")]
    assert not [v for v in table.to_numpy().ravel() if v in (None, "None")]
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
    assert at.selectbox(key="upload-kb").value == "spices"  # the new one is picked, here
    ask = at.sidebar.radio(key="page").set_value("Ask").run()
    assert ask.sidebar.selectbox(key="kb").value == "spices"  # and on the Ask page
    at = ask.sidebar.radio(key="page").set_value("Upload").run()
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
        assert [e.value for e in at.error] == [
            f"a\\.md: {len(VIOLET)} bytes, over the upload limit of 64 bytes"]
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
    assert at.success[0].value.startswith("Done: 2 of 2 files stored in smoking")
    assert "violet.md" in documents(db, "smoking")
    assert "saffron.md" not in documents(db, "smoking")  # its result was kept, not run again


def test_an_unsupported_file_is_named_with_its_reason(db: Path) -> None:
    at = finished(upload(upload_page(), ("notes.xyz", b"plain words", "application/octet-stream"),
                         ("violet.md", VIOLET, "text/markdown")))
    assert not at.exception
    assert [e.value.replace("\\", "") for e in at.error] == [
        "notes.xyz: unsupported file type .xyz; supported: .docx, .htm, .html, .markdown, .md, "
        ".pdf, .text, .txt"]
    assert at.success[0].value.startswith("Done: 1 of 2 files stored in smoking, 1 rejected")


def test_unchanged_files_are_not_counted_as_stored(db: Path) -> None:
    at = finished(upload(upload_page(), ("violet.md", VIOLET, "text/markdown")))
    at = finished(upload(at, ("violet.md", VIOLET, "text/markdown"),
                         ("saffron.md", SAFFRON, "text/markdown")), jobs=2)
    done = at.success[0].value  # the newest job's, shown first
    assert done == ("Done: 1 of 2 files stored in smoking, 1 unchanged (stored already). Ask "
                    "about them on the Ask page."), done
    table = at.dataframe[0].value
    assert list(table["result"]) == ["unchanged (stored already)", "stored (new)"]


def test_sizes_are_in_megabytes(db: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from citewise.api.settings import get_settings
    from citewise.ui.upload_page import megabytes

    assert [megabytes(n) for n in (64, 10 << 20, 5 << 19, 1 << 30)] == [
        "64 bytes", "10 MB", "2.5 MB", "1,024 MB"]
    monkeypatch.setenv("CITEWISE_MAX_UPLOAD_BYTES", str(1 << 20))
    get_settings.cache_clear()
    try:
        at = upload_page()
        assert at.file_uploader[0].label.endswith(", 1 MB each)")
        at = finished(upload(at, ("big.md", b"# Big\n\n" + b"word " * 300_000, "text/markdown")))
        assert [e.value for e in at.error] == [
            "big\\.md: 1\\.4 MB, over the upload limit of 1 MB"]
    finally:
        get_settings.cache_clear()
