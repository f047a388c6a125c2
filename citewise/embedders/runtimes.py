"""Execution paths of the local model: the runtime and precision that run its graph on this CPU.

    onnxruntime-fp32   ONNX Runtime, float32; every host, and what knowledge bases made before
                       paths existed were embedded with
    openvino-f32       OpenVINO, float32 (oneDNN's kernels)
    openvino-bf16      OpenVINO, bfloat16 matrix products; only where the CPU has them natively
                       (AMX or AVX512_BF16), never emulated

The fastest path the host offers is chosen once per host, model and runtime versions and cached
beside the graph (``$CITEWISE_CACHE/paths/``): each candidate is compiled, checked against the
probe vectors recorded from sentence-transformers (``QUALITY``: in one padded batch and each
alone, and each text alone against the same text in the batch, so that a text's vector never
depends on its batch) and timed on a fixed batch of the probes' word pieces, in a few seconds.
A reduced precision is a candidate only because ``benchmarks/embed_paths.py`` found that it
moves SciFact hybrid nDCG@10 by at most 0.003 and does not lower recall@5 on the sample's test
questions. ``CITEWISE_EMBED_PATH`` names a path to use instead of measuring.

A knowledge base records the path its vectors were made with, and its questions are embedded by
the same path; a path this host cannot run is an error that says so (``LocalEmbedder``).
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import importlib.util
import logging
import os
import platform
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np

log = logging.getLogger(__name__)
REFERENCE = "onnxruntime-fp32"
PATHS = ("onnxruntime-fp32", "openvino-f32", "openvino-bf16")
# the least cosine to the recorded probe vectors each path must reach here, batched and alone:
# float32 paths reproduce them; bfloat16 measured 0.99997 at worst (benchmarks/embed_paths.py)
QUALITY = {"onnxruntime-fp32": 0.9999, "openvino-f32": 0.9999, "openvino-bf16": 0.9995}
SAME_TEXT = 0.9999  # a text alone against itself in a padded batch
TIMED_ROWS, TIMED_LEN, TIMED_RUNS = 32, 128, 3


class Runner:
    """Runs a graph: ``run(ids, mask, tokens)`` gives the vectors (and the token states)."""

    path: Path | None

    def run(self, ids: np.ndarray, mask: np.ndarray, tokens: bool = False) -> list[np.ndarray]:
        raise NotImplementedError


@dataclass(frozen=True)
class OnnxRuntime(Runner):
    """An ONNX Runtime session of the graph."""

    session: Any = field(repr=False)
    path: Path | None

    def run(self, ids: np.ndarray, mask: np.ndarray, tokens: bool = False) -> list[np.ndarray]:
        names = ["embedding", "tokens"] if tokens else ["embedding"]
        return self.session.run(names, {"input_ids": ids, "attention_mask": mask})


@dataclass(frozen=True)
class OpenVino(Runner):
    """An OpenVINO compiled model of the graph: one stream per thread it may use, so that
    questions running at once each get a stream, as each gets a thread on ONNX Runtime; an
    infer request per calling thread."""

    compiled: Any = field(repr=False)
    path: Path | None
    local: threading.local = field(default_factory=threading.local, repr=False)

    def run(self, ids: np.ndarray, mask: np.ndarray, tokens: bool = False) -> list[np.ndarray]:
        request = getattr(self.local, "request", None)
        if request is None:
            request = self.local.request = self.compiled.create_infer_request()
        out = request.infer({"input_ids": ids, "attention_mask": mask})
        names = ["embedding", "tokens"] if tokens else ["embedding"]
        return [np.array(out[self.compiled.output(name)]) for name in names]


@cache
def _openvino() -> Any:
    if importlib.util.find_spec("openvino") is None:
        return None
    try:
        import openvino

        return openvino.Core()
    except Exception as e:  # a broken install is a missing one, said once
        log.warning("OpenVINO is installed but cannot start (%s): the model runs on ONNX Runtime", e)
        return None


def capabilities() -> frozenset[str]:
    """What OpenVINO's CPU plugin says this CPU computes natively (FP32, BF16, INT8, ...);
    empty without OpenVINO."""
    core = _openvino()
    return frozenset(core.get_property("CPU", "OPTIMIZATION_CAPABILITIES")) if core else frozenset()


def offered() -> tuple[str, ...]:
    """The paths this host can run: ONNX Runtime always, OpenVINO where it is installed, and
    bfloat16 only where the CPU has it natively."""
    caps = capabilities()
    found = [REFERENCE]
    if "FP32" in caps:
        found.append("openvino-f32")
    if "BF16" in caps:
        found.append("openvino-bf16")
    return tuple(found)


def unavailable(path: str) -> str | None:
    """Why this host cannot run ``path``; None when it can."""
    if path not in PATHS:
        return f"{path!r} is not an execution path citewise knows ({', '.join(PATHS)})"
    if path == REFERENCE or path in offered():  # the reference runs everywhere: no OpenVINO import
        return None
    if _openvino() is None:
        return f"{path} needs OpenVINO, which is not installed here (pip install openvino)"
    return f"{path} needs a CPU with native bfloat16 (AMX or AVX512_BF16), which this one lacks"


def open_runner(path: str, source: Path | bytes, threads: int | None, streams: int = 1) -> Runner:
    """The graph ``source`` on execution path ``path``: on ``threads`` threads, or, with
    ``streams``, that many runs at once of ``threads`` threads each (OpenVINO; ONNX Runtime
    runs each caller on its own threads anyway)."""
    if path == REFERENCE or not isinstance(source, Path):  # a graph kept in memory: ORT only
        from citewise.embedders.local_onnx import open_session

        return OnnxRuntime(open_session(source, threads), source if isinstance(source, Path) else None)
    core = _openvino()
    threads = threads or 1
    config = {"INFERENCE_PRECISION_HINT": path.rpartition("-")[2], "NUM_STREAMS": streams,
              "INFERENCE_NUM_THREADS": threads * streams}
    return OpenVino(core.compile_model(core.read_model(str(source)), "CPU", config), source)


def host_key() -> str:
    """What a measurement depends on: the CPU, its flags, the cores and the runtimes' versions."""
    cpu, flags = platform.processor(), ""
    try:
        info = Path("/proc/cpuinfo").read_text().split("\n\n", 1)[0]
        cpu = next((line.split(":", 1)[1] for line in info.splitlines() if "model name" in line), cpu)
        flags = next((line.split(":", 1)[1] for line in info.splitlines()
                      if line.startswith("flags")), "")
    except OSError:
        pass
    versions = [_version(p) for p in ("onnxruntime", "openvino")]
    key = [cpu.strip(), sorted(flags.split()), len(os.sched_getaffinity(0)), versions]
    return hashlib.sha256(repr(key).encode()).hexdigest()[:16]


def _version(package: str) -> str:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return ""


@dataclass(frozen=True)
class Trial:
    """One candidate's measurement: word pieces a second, and its worst cosines."""

    path: str
    pieces_per_s: float
    probe_cosine: float
    same_text: float

    @property
    def passed(self) -> bool:
        return self.probe_cosine >= QUALITY[self.path] and self.same_text >= SAME_TEXT


def trial(path: str, runner: Runner, rows: list[list[int]], expected: np.ndarray,
          embed: Callable[[Runner, list[list[int]]], np.ndarray]) -> Trial:
    """Check ``runner`` against the probe vectors ``expected`` of ``rows`` and time it on
    ``TIMED_ROWS`` rows of ``TIMED_LEN`` word pieces made of them (best of ``TIMED_RUNS``)."""
    batch = embed(runner, rows)
    alone = np.vstack([embed(runner, [r]) for r in rows])
    probe = float(min((batch * expected).sum(1).min(), (alone * expected).sum(1).min()))
    same = float((batch * alone).sum(1).min())
    words = [i for r in rows for i in r[1:-1]] or [100]
    timed = [[rows[0][0], *(words * TIMED_LEN)[k: k + TIMED_LEN - 2], rows[0][-1]]
             for k in range(TIMED_ROWS)]
    embed(runner, timed)  # warm: the first run plans its kernels
    best = float("inf")
    for _ in range(TIMED_RUNS):
        started = time.perf_counter()
        embed(runner, timed)
        best = min(best, time.perf_counter() - started)
    return Trial(path, TIMED_ROWS * TIMED_LEN / best, probe, same)


def fastest(model: str, weights_sha: str, source: Path | bytes, threads: int,
            measure: Callable[[str, Runner], Trial]) -> str:
    """The fastest path this host offers whose ``measure`` passes, measured once and kept in
    ``$CITEWISE_CACHE/paths/`` per host, model and runtime versions (``CITEWISE_EMBED_PATH``
    names one instead)."""
    from citewise.embedders.local_onnx import cache_dir, read_json, write_json

    forced = os.environ.get("CITEWISE_EMBED_PATH", "").strip()
    if forced:
        if (why := unavailable(forced)) is not None:
            from citewise.errors import ConfigError

            raise ConfigError(f"CITEWISE_EMBED_PATH: {why}")
        return forced
    offers = offered()
    if len(offers) == 1 or not isinstance(source, Path):
        return REFERENCE
    record = cache_dir() / "paths" / f"{model}-{weights_sha[:16]}-{host_key()}.json"
    known = read_json(record)
    if known.get("path") in offers:
        return str(known["path"])
    trials = []
    for path in offers:
        try:
            trials.append(measure(path, open_runner(path, source, threads)))
        except Exception as e:  # a runtime that fails here is not a candidate
            log.warning("execution path %s cannot run the model here (%s); not used", path, e)
    passed = [t for t in trials if t.passed] or [Trial(REFERENCE, 0.0, 1.0, 1.0)]
    chosen = max(passed, key=lambda t: t.pieces_per_s).path
    for t in trials:
        log.info("embedding path %s: %.0f word pieces/s, probe cosine %.6f, alone vs batch "
                 "%.6f%s", t.path, t.pieces_per_s, t.probe_cosine, t.same_text,
                 "" if t.passed else " (below the bound: not used)")
    try:
        write_json(record, {"path": chosen, "trials": [t.__dict__ for t in trials]})
    except OSError as e:
        log.warning("cannot record the chosen embedding path in %s (%s): measured again next "
                    "time", record, e)
    return chosen


__all__ = ["fastest", "PATHS", "REFERENCE", "Runner", "Trial", "host_key", "offered", "open_runner",
           "trial", "unavailable"]
