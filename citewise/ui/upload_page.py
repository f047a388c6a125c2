"""The console's Upload page: files into a knowledge base (an existing one, or one it creates)
as an ingestion job of the store (``store.jobs``, the job rows the HTTP service keeps), the
operator's own (tenant 0) like everything the console shows.

The console process runs its jobs itself, in one background thread (``console_jobs``), and
the page polls the job: files done of the total, and each file's result as it is known, in
words (stored new or replacing, unchanged, rejected with its reason); the closing count keeps
unchanged files apart from stored ones. A file is checked as an HTTP upload is (its name and
type, ``CITEWISE_MAX_UPLOAD_BYTES``, at most ``CITEWISE_MAX_FILES``) and a bad one changes
nothing stored, the good ones beside it are stored. The uploader takes files of any type, so
that one citewise does not read reaches that check and is named with its reason; sizes are
shown in MB. The knowledge base picked here is the session's on every page (``CHOSEN``), and
an upload picks the one it went into. A job a console left unfinished (it stopped or died) is
taken over by another console open on that store (``jobs.py``: leases), or by the next one
opened, which shows it as resumed.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import closing
from dataclasses import dataclass
from typing import Any, Protocol

import pandas as pd
import streamlit as st

from citewise.api.settings import get_settings
from citewise.engine import Engine, IngestReport
from citewise.errors import (
    AlreadyExistsError,
    CitewiseError,
    DocumentError,
    KnowledgeBaseError,
    UploadTooLargeError,
)
from citewise.ingest.documents import LOADERS
from citewise.ingest.jobs import OPERATOR, JobRunner, ThreadStores  # the console's: the operator's
from citewise.ingest.uploaded import FileResult, check_filename, rejected, store_file
from citewise.kb import KnowledgeBase
from citewise.records import Document
from citewise.stores import Store, open_store
from citewise.stores.job_rows import Job, JobFile
from citewise.tenancy import check_kb_name
from citewise.ui.text import esc

NEW_KB = "(a new knowledge base)"
CHOSEN = "kb-chosen"  # the session's knowledge base, on every page (a plain key, not a widget's)
MAX_SHOWN = 256  # characters of a file name a result echoes, as over HTTP
POLL_S = 1.0
WHAT_TO_DO = ("A rejected file changed nothing stored, and the other files were stored. Fix each "
              "one as its reason says (a readable file of a supported type, under the size "
              "limit, a plain name) and upload it again; a file stored already reads unchanged.")
STATUS = {"added": "stored (new)", "replaced": "stored (replaced the earlier version)",
          "unchanged": "unchanged (stored already)", "rejected": "rejected"}


class Uploaded(Protocol):
    """What a file from ``st.file_uploader`` gives (``UploadedFile``)."""

    name: str
    size: int

    def getvalue(self) -> bytes: ...


@dataclass(frozen=True)
class ConsoleJobs:
    runner: JobRunner
    resumed: tuple[str, ...]  # the jobs this process resumed when it started


@st.cache_resource(show_spinner=False)
def console_jobs(url: str) -> ConsoleJobs:
    """This console process's job runner on the store at ``url`` (one per process), which
    resumes the operator's jobs left unfinished by a console that stopped."""
    stores = ThreadStores(url)

    def ingest(kb: KnowledgeBase, filename: str, data: bytes) -> FileResult:
        def store_doc(kb: KnowledgeBase, doc: Document) -> IngestReport:
            return Engine(stores()).ingest(kb, [doc])

        return store_file(kb, filename, filename, data, store_doc)[0]

    runner = JobRunner(stores, ingest, threads=1, lease_s=get_settings().job_lease_s)
    # stop after the current file when the console exits, not after the whole job: this runs
    # before concurrent.futures joins its threads (the same hook it registers with)
    getattr(threading, "_register_atexit")(runner.close)  # noqa: B009
    return ConsoleJobs(runner, tuple(j.id for j in runner.resume(operator=True)))


def check_upload(files: Sequence[Uploaded], max_files: int) -> None:
    """``DocumentError`` for the upload as a whole, as over HTTP: no file, too many, or two
    of one name."""
    if not files:
        raise DocumentError("Choose one or more files to upload.")
    if len(files) > max_files:
        raise DocumentError(f"{len(files)} files in one upload; the limit is {max_files} "
                            "(CITEWISE_MAX_FILES)")
    if len({f.name for f in files}) < len(files):
        raise DocumentError("two files have the same name; a name is a document's id")


def megabytes(n: int) -> str:
    """A size as the console shows it: "10 MB", "2.5 MB" (MB of 1,048,576 bytes, as
    Streamlit's own limits), or bytes under a tenth of one."""
    if n < (1 << 20) // 10:
        return f"{n:,} bytes"
    return f"{n / (1 << 20):,.1f}".removesuffix(".0") + " MB"


def job_files(files: Sequence[Uploaded], limit: int) -> Iterator[JobFile]:
    """The files as a job keeps them, read one at a time into its transaction: bytes to
    ingest, or a rejection already (a bad name or type, over ``limit`` bytes)."""
    for f in files:
        shown = f.name[:MAX_SHOWN]
        try:
            name = check_filename(f.name)
            if f.size > limit:
                raise UploadTooLargeError(f"{megabytes(f.size)}, over the upload limit of "
                                          f"{megabytes(limit)}")
        except DocumentError as e:
            yield JobFile(shown, None, rejected(shown, e)[0].as_dict())
            continue
        yield JobFile(name, f.getvalue())


def target_kb(store: Store, choice: str, name: str, embedder: str) -> KnowledgeBase:
    """The chosen knowledge base, or a new one named ``name`` (checked as everywhere)."""
    if choice != NEW_KB:
        return store.get_kb(choice, OPERATOR)
    name = check_kb_name(name.strip())
    try:
        store.get_kb(name, OPERATOR)
    except KnowledgeBaseError:
        return Engine(store).create_kb(name, embedder.strip() or None, tenant=OPERATOR)
    raise AlreadyExistsError(f"Knowledge base {name!r} already exists; choose it in the list")


def _watched() -> list[str]:
    return st.session_state.setdefault("upload-jobs", [])


def start(store: Store, jobs: ConsoleJobs, files: Sequence[Uploaded], choice: str, name: str,
          embedder: str) -> Job:
    settings = get_settings()
    check_upload(files, settings.max_files)
    kb = target_kb(store, choice, name, embedder)
    job = store.jobs.create_job(OPERATOR, kb.name, job_files(files, settings.max_upload_bytes))
    jobs.runner.submit(job)
    return job


def show_job(store: Store, job: Job, resumed: bool) -> None:
    st.caption(f"job {job.id} · started {job.created_at}")
    if resumed:
        st.caption("Resumed: the console stopped before this job finished.")
    st.progress(job.done / job.total if job.total else 1.0,
                text=f"{job.done} of {job.total} files · {job.state}")
    if job.results:
        st.dataframe(results_table(job.results), hide_index=True)
    bad = [r for r in job.results if r["status"] == "rejected"]
    for r in bad:
        st.error(f"{esc(r['filename'])}: {esc(r['reason'] or 'rejected')}")
    if job.state == "done":
        st.success(done_message(job))
        if bad:
            st.info(WHAT_TO_DO)
    elif job.state == "failed":
        left = [esc(n) for _, n in store.jobs.pending_files(job.id)]
        st.error(f"The job stopped: {esc(job.error or 'failed')}. Not ingested: "
                 f"{', '.join(left) or 'none'}; fix the cause and upload those files again.")


def results_table(results: Sequence[dict[str, Any]]) -> pd.DataFrame:
    """Each file's result in words: what became of it, its passages, and why when rejected."""
    return pd.DataFrame(
        [{"file": r["filename"], "result": STATUS.get(r["status"], r["status"]),
          "passages": str(r["chunks"]) if r["status"] != "rejected" else "—",
          "why": r["reason"] or ""} for r in results],
        columns=["file", "result", "passages", "why"])


def done_message(job: Job) -> str:
    """How many files were stored (new or replacing a version), left as they were (stored
    already) and rejected: an unchanged file is not counted as stored."""
    count = Counter(r["status"] for r in job.results)
    stored = count["added"] + count["replaced"]
    parts = [f"{stored} of {job.total} file{'s' if job.total != 1 else ''} stored in {esc(job.kb)}"]
    if count["unchanged"]:
        parts.append(f"{count['unchanged']} unchanged (stored already)")
    if count["rejected"]:
        parts.append(f"{count['rejected']} rejected")
    ask = " Ask about them on the Ask page." if stored or count["unchanged"] else ""
    return f"Done: {', '.join(parts)}.{ask}"


def jobs_view(url: str, resumed: tuple[str, ...], live: bool) -> None:
    """The session's jobs, newest first, polled while one is unfinished; once all are, the
    whole page is drawn again (the sidebar's counts) and polling stops."""
    with closing(open_store(url)) as store:
        jobs = [j for j in (store.jobs.get_job(i, OPERATOR) for i in _watched()) if j]
        for n, job in enumerate(jobs):
            title = f"Job {job.id[:8]} into {job.kb}"
            if n == 0:
                st.subheader(title)
                show_job(store, job, job.id in resumed)
            else:
                with st.expander(f"{title} · {job.state}"):
                    show_job(store, job, job.id in resumed)
    if live and all(j.state in ("done", "failed") for j in jobs):
        st.rerun()


def upload_page(store: Store, kbs: list[KnowledgeBase], url: str, jobs: ConsoleJobs) -> None:
    st.header("Upload documents")
    try:
        settings = get_settings()
    except CitewiseError as e:  # a bad CITEWISE_MAX_UPLOAD_BYTES, say: named, with its source
        st.error(esc(str(e)))
        return
    watched = _watched()
    unfinished = [j.id for j in store.jobs.unfinished_jobs() if j.tenant_id == OPERATOR]
    for job_id in [*jobs.resumed, *unfinished]:  # resumed, or running from another session
        if job_id not in watched:
            watched.append(job_id)
    names = [kb.name for kb in kbs]
    chosen = st.session_state.get(CHOSEN)
    choice = st.selectbox("Into knowledge base", [*names, NEW_KB], key="upload-kb",
                          index=names.index(chosen) if chosen in names else 0)
    if choice != NEW_KB:
        st.session_state[CHOSEN] = choice
    name = embedder = ""
    if choice == NEW_KB:
        name = st.text_input("Name of the new knowledge base", key="new-kb-name")
        embedder = st.text_input("Embedder", value=settings.embedder, key="new-kb-embedder")
    generation = st.session_state.setdefault("upload-generation", 0)
    # every type is let through, so that a file of a type citewise does not read is named
    # with its reason in the results (``check_filename``) rather than refused unnamed
    files = st.file_uploader(
        f"Files (up to {settings.max_files}, {megabytes(settings.max_upload_bytes)} each)",
        help=f"Types read: {', '.join(sorted(LOADERS))}.", accept_multiple_files=True,
        max_upload_size=max(1, -(-settings.max_upload_bytes // (1 << 20))),
        key=f"upload-files-{generation}")
    if st.button("Ingest the files", key="upload", type="primary"):
        try:
            job = start(store, jobs, files or [], choice, name, embedder)
        except CitewiseError as e:
            st.error(esc(str(e)))
        else:
            watched.insert(0, job.id)
            st.session_state["upload-generation"] = generation + 1  # an empty uploader
            st.session_state[CHOSEN] = job.kb  # picked on every page, the new one too
            del st.session_state["upload-kb"]
            st.rerun()
    if not watched:
        return
    states = [store.jobs.get_job(i, OPERATOR) for i in watched]
    live = any(j is not None and j.state in ("queued", "running") for j in states)
    st.fragment(jobs_view, run_every=POLL_S if live else None)(url, jobs.resumed, live)
