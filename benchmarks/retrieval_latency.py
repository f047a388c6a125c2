"""Retrieval latency per question by stage, citewise beside LlamaIndex in the same run.

citewise is timed through ``Engine.decide`` (what ``ask`` runs before any generator): the
question's embedding, dense, BM25, fusion and MMR (``fuse``), and the gate (``gate``: the
context's sentence rows, the signals, the decision). LlamaIndex through
``vs_llamaindex.Pipeline.retrieve``. The systems take each question in turn, so a change in
the machine's load hits both alike; with ``block`` > 1 each system takes that many questions
in a row before the other takes the same ones, so a question follows the same system's last
one, as in a serving process, not the other system's (LlamaIndex's pure-Python dense search
between two of citewise's questions leaves its caches cold: every citewise stage ~20% slower
than alone), and the load still hits both alike block by block. Each stage is given as
p50/p90 in ms, with ``cpu``, the asking thread's CPU time (on a shared machine the wall time
is mostly waiting for a core; the CPU time is what it tends to on an idle one), the load
average before and after, and the CPU time the whole process spent while timing.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence

import numpy as np

from benchmarks.benchcache import host
from citewise.engine import Engine
from citewise.kb import KnowledgeBase

STAGES = ("embed", "dense", "bm25", "fuse", "gate", "total", "cpu")
TARGET_MS = 10.0  # issue #18: p50 per question, idle machine
TARGET_RATIO = 0.2  # ... and at most 0.2x LlamaIndex's retrieval in the same run

Timer = Callable[[str], dict[str, float]]


def citewise_timer(engine: Engine, kb: KnowledgeBase) -> Timer:
    """One question through ``engine.decide``: its stage times in ms."""

    def once(question: str) -> dict[str, float]:
        t, cpu = time.perf_counter(), time.thread_time()
        decided = engine.decide(kb, question)
        total, cpu = (time.perf_counter() - t) * 1000, (time.thread_time() - cpu) * 1000
        spent = decided.retrieved.timings
        return {"embed": spent["embed_ms"], "dense": spent["dense_ms"], "bm25": spent["bm25_ms"],
                "fuse": spent["fuse_ms"], "gate": spent["gate_ms"], "total": total, "cpu": cpu}

    return once


def measure(systems: dict[str, Timer], questions: Sequence[str], block: int = 1
            ) -> tuple[dict[str, dict[str, list[float]]], dict[str, float]]:
    """Every system's stage times for every question (the first question is asked once more
    before, to warm each up), ``block`` questions of one system in a row, and the run's load
    averages and process CPU seconds."""
    for once in systems.values():
        once(questions[0])
    out: dict[str, dict[str, list[float]]] = {name: {} for name in systems}
    load_before, cpu = os.getloadavg(), time.process_time()
    for start in range(0, len(questions), block):
        for name, once in systems.items():
            for question in questions[start : start + block]:
                for stage, ms in once(question).items():
                    out[name].setdefault(stage, []).append(ms)
    load_after = os.getloadavg()
    run = {"load_before": load_before[0], "load_after": load_after[0],
           "load_5min": load_after[1], "process_cpu_s": time.process_time() - cpu, "block": block}
    return out, run


def cell(values: list[float] | None) -> str:
    if not values:
        return "-"
    return f"{np.percentile(values, 50):.2f}/{np.percentile(values, 90):.2f}"


def table(measured: dict[str, dict[str, list[float]]], run: dict[str, float]) -> str:
    """The table: one row per system, p50/p90 per stage, then the run's load and CPU time and
    the targets (when both systems ran)."""
    block = int(run.get("block", 1))
    turns = ("the systems in turn" if block == 1 or len(measured) == 1
             else f"each system {block} questions in a row, then the other the same ones")
    lines = [f"Retrieval latency per question (one at a time, {turns}), ms p50/p90",
             f"{'system':<12}{'n':>5}" + "".join(f"{s:>15}" for s in STAGES)]
    for name, stages in measured.items():
        n = len(stages.get("total", []))
        lines.append(f"{name:<12}{n:>5}" + "".join(f"{cell(stages.get(s)):>15}" for s in STAGES))
    lines.append(f"load average {run['load_before']:.2f} before, {run['load_after']:.2f} after "
                 f"(5 min {run['load_5min']:.2f}) on {os.cpu_count()} cores; the process spent "
                 f"{run['process_cpu_s']:.1f} s of CPU timing these questions")
    lines.append(host())
    lines.append("cpu: the asking thread's CPU time; gate: citewise's sentence rows, signals and "
                 "decision (LlamaIndex has none); LlamaIndex's fuse: the rest of its fusion call")
    ours = measured.get("citewise", {}).get("total")
    theirs = next((s["total"] for name, s in measured.items() if name != "citewise"), None)
    if ours:
        p50 = float(np.percentile(ours, 50))
        line = f"target: citewise p50 <= {TARGET_MS:g} ms: {p50 <= TARGET_MS} ({p50:.2f})"
        if theirs:
            ratio = p50 / float(np.percentile(theirs, 50))
            line += f"; <= {TARGET_RATIO:g}x LlamaIndex's p50: {ratio <= TARGET_RATIO} ({ratio:.2f}x)"
        lines.append(line + " (targets hold for an idle machine only)")
    return "\n".join(lines)
