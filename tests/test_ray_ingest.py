"""``citewise ingest --ray`` on a local Ray instance of two CPUs: the same store as a single
process, a worker killed mid-run retried without duplicates, and a killed driver resumed."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from citewise.cli import fill_optional_values
from citewise.engine import Engine
from citewise.stores.sqlite import open_sqlite
from tests.envcheck import need_module

need_module("ray", "Ray (the ray extra: pip install -e '.[ray]')")
pytestmark = pytest.mark.server  # starts a local Ray instance
ROOT = Path(__file__).resolve().parent.parent
EMBEDDER = "hashing:64"
N = 1200  # documents: enough for a run to last long enough to be interrupted


def corpus(path: Path, n: int) -> Path:
    with path.open("w") as f:
        for i in range(n):
            text = " ".join(f"Passage {i} on varenicline dose {i % 37} mg and patch use." for _ in range(3))
            f.write(json.dumps({"_id": f"d{i}", "title": f"Doc {i}", "text": text}) + "\n")
        f.write("not json\n")
    return path


def stored(db: Path) -> dict[str, list[str]]:
    """Document id -> its chunk ids, read through a connection of the test's own."""
    con = sqlite3.connect(db, timeout=30)
    rows = con.execute("SELECT doc_id, chunk_id FROM chunks ORDER BY doc_id, ordinal").fetchall()
    con.close()
    out: dict[str, list[str]] = {}
    for doc_id, chunk_id in rows:
        out.setdefault(doc_id, []).append(chunk_id)
    return out


def count_docs(db: Path) -> int:
    try:
        con = sqlite3.connect(db, timeout=30)
        try:
            return con.execute("SELECT count(*) FROM documents").fetchone()[0]
        finally:
            con.close()
    except sqlite3.OperationalError:
        return 0


def single_process(tmp: Path, source: Path) -> dict[str, list[str]]:
    store = open_sqlite(tmp / "single.db")
    engine = Engine(store)
    engine.ingest(engine.open_kb("kb", embedder=EMBEDDER), [source])
    store.close()
    return stored(tmp / "single.db")


def run_cli(db: Path, source: Path) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen(
        [sys.executable, "-m", "citewise", "--db", str(db), "ingest", "-q", "--kb", "kb",
         "--embedder", EMBEDDER, str(source), "--ray-workers", "2", "--ray"],
        env=env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        start_new_session=True,  # the driver and the Ray instance it starts, killable as one
    )


def ray_workers_running(task: str) -> list[int]:
    pids = []
    for proc in Path("/proc").iterdir():
        try:
            if proc.name.isdigit() and task in (proc / "cmdline").read_text():
                pids.append(int(proc.name))
        except OSError:
            continue
    return pids


def wait_for(predicate, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return False


def tally(out: str, what: str) -> int:
    """A count from the CLI's closing line, ``kb: 10 added, 0 replaced, 3 unchanged, ...``."""
    return int(out.split(f" {what}")[0].rsplit(" ", 1)[1])


def test_optional_address() -> None:
    assert fill_optional_values(["ingest", "x", "--ray"]) == ["ingest", "x", "--ray", "local"]
    assert fill_optional_values(["ingest", "--ray", "-q", "x"])[2] == "local"
    assert fill_optional_values(["ingest", "--ray", "auto"]) == ["ingest", "--ray", "auto"]


def test_ray_ingest_matches_one_process_and_resumes(tmp_path: Path) -> None:
    from citewise.ingest import distributed

    source = corpus(tmp_path / "corpus.jsonl", 300)
    store = open_sqlite(tmp_path / "ray.db")
    engine = Engine(store)
    engine.open_kb("kb", embedder=EMBEDDER)
    report = distributed.ingest(store.url, "kb", [source], "local", workers=2, batch_docs=8)
    assert len(report.added) == 300 and [s.reason[:22] for s in report.skipped] == [
        "not a BEIR corpus line"]
    assert stored(tmp_path / "ray.db") == single_process(tmp_path, source)
    # a second run finds every document stored and writes nothing
    again = distributed.ingest(store.url, "kb", [source], "local", workers=2, batch_docs=8)
    assert len(again.unchanged) == 300 and again.chunks == 0


def test_a_worker_killed_mid_run_is_retried_without_duplicates(tmp_path: Path) -> None:
    source = corpus(tmp_path / "corpus.jsonl", N)
    db = tmp_path / "ray.db"
    run = run_cli(db, source)
    try:
        assert wait_for(lambda: count_docs(db) >= 50 and ray_workers_running("ingest_batch"), 240)
        victims = ray_workers_running("MapBatches(ingest_batch)")
        os.kill(victims[0], signal.SIGKILL)
        at_kill = count_docs(db)
        out, err = run.communicate(timeout=300)
    finally:
        if run.poll() is None:
            os.killpg(run.pid, signal.SIGKILL)
    assert at_kill < N, "the run ended before a worker could be killed"
    assert run.returncode == 0, err[-2000:]
    added, unchanged = tally(out, "added"), tally(out, "unchanged")
    # the killed task was retried: every document is stored exactly once (documents it had
    # stored before the kill come back "unchanged"; none, when the kill landed while it was
    # still embedding its batch, which sentence vectors made the longer part of a task)
    assert added + unchanged == N
    assert stored(db) == single_process(tmp_path, source)


def test_a_killed_driver_resumes_where_it_stopped(tmp_path: Path) -> None:
    source = corpus(tmp_path / "corpus.jsonl", N)
    db = tmp_path / "ray.db"
    run = run_cli(db, source)
    try:
        assert wait_for(lambda: count_docs(db) >= 100, 240)
    finally:
        os.killpg(run.pid, signal.SIGKILL)  # the driver and the local Ray instance it started
        run.communicate(timeout=60)
    done = count_docs(db)
    assert 0 < done < N, "the run ended before the driver could be killed"
    resumed = run_cli(db, source)
    out, err = resumed.communicate(timeout=300)
    assert resumed.returncode == 0, err[-2000:]
    assert tally(out, "unchanged") >= done  # documents stored before the kill are skipped, not redone
    assert stored(db) == single_process(tmp_path, source)
