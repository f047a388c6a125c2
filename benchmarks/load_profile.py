"""Where the server's CPU goes under load, and what its processes used: the load benchmark's
measurements besides latency.

``Sampler`` runs py-spy (``pip install 'citewise[dev]'``) on the server and its workers for the
measured window, non-blocking (the server is never paused), sampling only the thread that holds
the GIL (``--gil``): py-spy's idle detection counts threads waiting for the GIL or for work as
busy, so without it a third of the samples sit in ``Condition.wait``. Python work is what one
worker cannot spread over cores, so its split is the one to cut; the CPU the ONNX model, numpy
and SQLite spend with the GIL released is the server's CPU time less the GIL samples' time.
``phase_of`` puts each sample in the phase of its deepest frame that ``PHASES`` names, so a
SQLite call made by the rate limiter counts as rate limiting and one made by the query log as
the query log; anything with no named frame (uvicorn, Starlette,
FastAPI's dependency and validation machinery, the event loop) counts as HTTP/ASGI. On a busy
machine the GIL's holder is often descheduled right after it wakes another thread (a
``Condition.notify`` handing work to a worker thread or a compute slot to a waiting ask), so
those frames take a larger share there than the CPU they use; compare shares on an idle one.

``Usage`` reads ``/proc``: the CPU time of the server's processes (user + system, the workers
included), their resident memory, and the client process's own CPU, so a table can say how many
milliseconds of CPU one request took on each side.
"""

from __future__ import annotations

import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

# (phase, path suffix of the file, function or None for any): the deepest frame of a sample
# that matches one names its phase
PHASES: list[tuple[str, str, str | None]] = [
    ("HTTP: Prometheus metrics", "prometheus_client/metrics.py", None),
    ("auth: key check", "citewise/api/deps.py", "get_caller"),
    ("auth: key check", "citewise/stores/tenants.py", "key_for_token"),
    ("auth: key check", "citewise/api/admission.py", None),
    ("rate limit", "citewise/ratelimit.py", None),
    ("rate limit", "citewise/stores/rate_rows.py", None),
    ("knowledge base look-up", "citewise/api/deps.py", "resolve"),
    ("fair compute slots", "citewise/api/compute.py", None),
    ("ask route: result to JSON", "citewise/api/ask.py", None),
    ("ask route: result to JSON", "citewise/output.py", None),
    ("ask: other (engine)", "citewise/engine.py", None),
    ("retrieval", "citewise/engine.py", "retrieve"),
    ("retrieval", "citewise/search/retrieval.py", None),
    ("retrieval", "citewise/stores/search_rows.py", None),
    ("retrieval", "citewise/stores/keyword_index.py", None),
    ("retrieval", "citewise/stores/kb_cache.py", None),
    ("retrieval", "citewise/search/fusion.py", None),
    ("retrieval", "citewise/search/keywords.py", None),
    ("gate", "citewise/answer/gate.py", None),
    ("gate", "citewise/answer/absent.py", None),
    ("sentence vectors (read)", "citewise/answer/sentence_vectors.py", None),
    ("drafting (generator)", "citewise/answer/drafting.py", None),
    ("drafting (generator)", "citewise/generators/extractive.py", None),
    ("citation check", "citewise/answer/citations.py", None),
    ("citation check", "citewise/answer/support.py", None),
    ("query log write", "citewise/engine.py", "_log"),
    ("query log write", "citewise/telemetry/log.py", None),
    ("query log write", "citewise/stores/log_rows.py", None),
]
HTTP = "HTTP/ASGI (uvicorn, Starlette, FastAPI, pydantic, JSON)"
FRAME = re.compile(r"^(?P<func>.*) \((?P<file>[^()]*?)(?::(?P<line>\d+))?\)$")


def phase_of(frames: list[tuple[str, str]]) -> str:
    """The phase of one sample, ``frames`` (function, file) from the outermost in."""
    found = HTTP
    for func, file in frames:
        file = file.replace("\\", "/")
        for name, suffix, function in PHASES:
            if file.endswith(suffix) and (function is None or func.rpartition(".")[2] == function):
                found = name
                break
    return found


def parse_raw(text: str) -> Counter[str]:
    """Samples per phase from py-spy's ``--format raw`` (one stack a line, then its count)."""
    counts: Counter[str] = Counter()
    for line in text.splitlines():
        stack, _, n = line.rpartition(" ")
        if not stack or not n.isdigit():
            continue
        frames = []
        for part in stack.split(";"):
            m = FRAME.match(part.strip())
            if m:
                frames.append((m["func"], m["file"]))
        counts[phase_of(frames)] += int(n)
    return counts


class Sampler:
    """py-spy on ``pid`` (and its worker processes) from ``start`` until ``stop``."""

    def __init__(self, pid: int, rate: int = 97, keep: Path | None = None) -> None:
        self.pid, self.rate, self.keep = pid, rate, keep
        self.exe = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
        self.available = Path(self.exe).exists()
        self.proc: subprocess.Popen | None = None
        self.out = Path(tempfile.mkstemp(prefix="citewise-load-", suffix=".txt")[1])

    def start(self, seconds: float) -> None:
        if not self.available:
            return
        self.proc = subprocess.Popen(
            [self.exe, "record", "--pid", str(self.pid), "--rate", str(self.rate), "--format",
             "raw", "--output", str(self.out), "--gil", "--nonblocking", "--subprocesses",
             "--duration", str(max(1, int(seconds))), "--full-filenames"],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)

    def stop(self) -> tuple[Counter[str], str]:
        """Samples per phase, and why there are none when there are none."""
        if self.proc is None:
            return Counter(), "py-spy not installed (pip install 'citewise[dev]')"
        try:
            _, err = self.proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            _, err = self.proc.communicate()
        text = self.out.read_text() if self.out.exists() else ""
        if self.keep is not None:
            self.keep.write_text(text)
        self.out.unlink(missing_ok=True)
        counts = parse_raw(text)
        return counts, "" if counts else f"py-spy recorded nothing: {err.strip()[-300:]}"


def profile_rows(counts: Counter[str], rate: int, requests: int, cpu_ms_per_request: float
                 ) -> list[tuple[str, str]]:
    """One row per phase, largest first: the milliseconds per request its thread held the GIL
    (samples / rate / requests) and its share; then the rest of the CPU per request, spent
    with the GIL released (the ONNX model, numpy, SQLite) or by the interpreter between
    samples."""
    held = {name: n / rate * 1000 / max(requests, 1) for name, n in counts.items()}
    total = sum(held.values())
    rows = [(f"  {name}", f"{ms:5.1f} ms  {ms / max(cpu_ms_per_request, 1e-9):5.1%}")
            for name, ms in sorted(held.items(), key=lambda kv: -kv[1])]
    rest = max(0.0, cpu_ms_per_request - total)
    return [*rows, ("  GIL released (ONNX, numpy, SQLite) or unsampled",
                    f"{rest:5.1f} ms  {rest / max(cpu_ms_per_request, 1e-9):5.1%}")]


def _children(pid: int) -> list[int]:
    found = []
    try:
        for task in Path(f"/proc/{pid}/task").iterdir():
            text = (task / "children").read_text().split()
            found += [int(c) for c in text]
    except OSError:
        pass
    return found


def tree(pid: int) -> list[int]:
    """``pid`` and all its descendants (uvicorn's worker processes)."""
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo += _children(p)
    return out


def _cpu_seconds(pid: int) -> float:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime


def _rss_mb(pid: int) -> float:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


@dataclass(frozen=True)
class Usage:
    """CPU seconds of the server's processes and of this (the clients') process, at one moment."""

    server_cpu: float
    client_cpu: float
    server_rss_mb: float
    load: tuple[float, float, float]

    @classmethod
    def now(cls, pid: int) -> Usage:
        pids = tree(pid)
        me = resource.getrusage(resource.RUSAGE_SELF)
        return cls(sum(map(_cpu_seconds, pids)), me.ru_utime + me.ru_stime,
                   sum(map(_rss_mb, pids)), os.getloadavg())

    def since(self, before: Usage) -> tuple[float, float]:
        """Server and client CPU seconds spent between ``before`` and this."""
        return self.server_cpu - before.server_cpu, self.client_cpu - before.client_cpu
