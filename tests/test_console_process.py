"""`citewise console` runs Streamlit as its child and stops it when it is stopped itself: a
SIGTERM, SIGHUP or SIGINT sent to citewise alone leaves no Streamlit serving (it went on, an
orphan, before)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from tests.helpers import sample_sqlite
from tests.live import free_port

pytestmark = pytest.mark.heavy  # starts processes and waits for them: make test, not make unit


def _children(pid: int) -> list[int]:
    """The processes whose parent is ``pid`` (from /proc)."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:  # gone meanwhile
            continue
        if int(fields[1]) == pid:
            found.append(int(stat.parent.name))
    return found


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads processes from /proc")
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP, signal.SIGINT],
                         ids=["SIGTERM", "SIGHUP", "SIGINT"])
def test_stopping_citewise_console_stops_its_streamlit(tmp_path: Path, signum: int) -> None:
    db = sample_sqlite(tmp_path / "console.db")
    port = free_port()
    command = [str(Path(sys.executable).parent / "citewise"), "--db", str(db), "console",
               "--port", str(port)]
    proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)  # the signal goes to citewise alone
    try:
        deadline = time.monotonic() + 60
        while True:
            assert proc.poll() is None and time.monotonic() < deadline, "the console did not start"
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health", timeout=2):
                    break
            except OSError:
                time.sleep(0.2)
        (child,) = _children(proc.pid)  # Streamlit
        proc.send_signal(signum)
        code = proc.wait(30)
        deadline = time.monotonic() + 5
        while Path(f"/proc/{child}").exists():  # reaped by citewise before it exited
            assert time.monotonic() < deadline, f"Streamlit ({child}) still runs"
            time.sleep(0.1)
        assert code == 128 + signum
    finally:
        with contextlib.suppress(ProcessLookupError):  # whatever of the two is left
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
