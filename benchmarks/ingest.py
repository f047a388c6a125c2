"""Bulk ingest: the ``citewise ingest`` CLI, Ray with 1 and 2 local workers, and LlamaIndex.

    python -m benchmarks.ingest [--docs N] [--vs llamaindex] [--llama-python PATH] [--ray 1,2]

Each path runs in a fresh process on the same BEIR corpus (SciFact's 5,183 abstracts unless
``--corpus`` / ``--docs`` say otherwise), one after the other, into a new SQLite file, and the
table shows for each: wall time (model loading included), CPU time, chunks (nodes) per second
and peak RSS. CPU time is the whole machine's (``/proc/stat``), so Ray's workers are counted;
it is only meaningful on an otherwise idle machine, which is why the load average before each
run is printed beside it. Peak RSS is the largest resident set of the process tree's
members, sampled every 0.2 s (for Ray: the largest single process, not their sum).

``--vs llamaindex`` runs ``benchmarks/llama_ingest.py`` (SentenceSplitter, the same
all-MiniLM-L6-v2 weights through HuggingFaceEmbedding, a VectorStoreIndex and BM25Retriever:
the pipeline ``benchmarks/vs_llamaindex.py`` retrieves from) with ``--llama-python``, a Python
that has the ``bench`` extra (its torch pulls CUDA builds from PyPI unless pinned to the CPU
wheel; a separate venv keeps it out of citewise's).

2026-12-01, all 5,183 SciFact abstracts, idle machine (nothing else running; load before each
run in the table), default local model on ONNX Runtime, LlamaIndex from a separate venv with
the bench extra (torch 2.13.0+cpu):

    path               load   wall s    CPU s  chunks  chunks/s  peak RSS MB
    citewise ingest    0.83    227.2    435.0  11,878      52.3          594
    ray, 1 worker      1.98    472.4    504.1  11,878      25.1          701
    ray, 2 workers     0.99    267.6    517.7  11,878      44.4          688
    LlamaIndex         2.17    203.2    395.3   5,196      25.6          872
    citewise ingest / LlamaIndex wall time: 1.12x      (before this round: 2,582 s vs 198 s)

Re-run 2026-12-01 20:36 on this session's machine (idle, ``--ray ''``), the same code before and
after that day's merges (150 abstracts: 32.2 and 27.8 CPU s), so the machine, not the code:

    path               load   wall s    CPU s  chunks  chunks/s  peak RSS MB
    citewise ingest    0.37    514.4    977.3  11,878      23.1          604
    LlamaIndex         2.11    227.4    434.9   5,196      22.8          901
    citewise ingest / LlamaIndex wall time: 2.26x

ONNX Runtime ran the model at ~6.5k word pieces a second here against ~10.7k on the earlier
machine, while torch (LlamaIndex) slowed by 12%: the ratio depends on the host.

Where the time goes (first 1,000 abstracts, same machine, in one process): 42.4 of 46.0 s in
the model (``embed_tokens``), 0.4 s writing. citewise gives the model 467,456 word pieces for
them: every piece of every abstract (309,244 of text), the title line on each chunk, and a
two-sentence overlap where an abstract is split at the model's 254 pieces (~35% of the text).
LlamaIndex's 1,024-token nodes are cut by the model at 256 pieces: 238,835 pieces, half as
many, the rest of each long abstract never embedded. Per piece, citewise runs 1.8x faster.
Fewer pieces through less overlap do not pay (same day, idle, in-process ingest, hybrid nDCG@10
on the 809 *train* claims, ``benchmarks.scifact --tune-only`` with the chunker's
``OVERLAP_SENTENCES`` patched): two sentences (shipped) 11,878 chunks, 227 s, 0.735; one
10,590, 204 s, 0.731; none 9,896, 181 s, 0.732 — each train point lost for ~10-20% of the time,
and none near 120 s. Nor does int8 within the 0.999 agreement the issue allows
(``benchmarks.quantized``). A Ray worker gets one core (``OMP_NUM_THREADS=1``), so one worker
runs at half speed; two workers match the single process plus Ray's start-up.

2026-12-05, all 5,183 SciFact abstracts, idle 2-core Xeon (AMX: avx512_bf16 amx_bf16 amx_int8),
``--vs llamaindex --ray '' --paths onnxruntime-fp32,`` (before and after in one run; quality
scored after the timing, not in it):

    path                       load   wall s    CPU s  chunks  chunks/s  peak RSS MB   nDCG@10  R@5
    citewise onnxruntime-fp32  0.11    356.2    690.9  11,878      33.3          676    0.7276 0.7889
    citewise openvino-bf16     1.93    112.0    195.4  11,878     106.1          650    0.7270 0.7889
    LlamaIndex                 1.75    160.9    308.1   5,196      32.3          884
    citewise onnxruntime-fp32 / LlamaIndex wall time: 2.21x
    citewise openvino-bf16 / LlamaIndex wall time: 0.70x

2026-12-07 18:44-19:04, all 5,183 SciFact abstracts, idle 2-core AMD EPYC, 2246 MHz, with AVX2
and no AVX-512 (OpenVINO computes FP32 and INT8: no bfloat16 path is offered), the same command,
after rows went 8 at a time rather than 32 (``embed_batches.py``):

    path                       load   wall s    CPU s  chunks  chunks/s  peak RSS MB   nDCG@10  R@5
    citewise onnxruntime-fp32  1.32    447.0    865.2  11,878      26.6          409    0.7276 0.7889
    citewise openvino-f32      2.05    446.6    849.0  11,878      26.6          537    0.7276 0.7889
    LlamaIndex                 1.98    285.0    554.8   5,196      18.2          873
    citewise onnxruntime-fp32 / LlamaIndex wall time: 1.57x
    citewise openvino-f32 / LlamaIndex wall time: 1.57x

Again at 525e09d (20:19-20:35, idle), after each chunk that fits is tokenized once, the default
path only:

    path                       load   wall s    CPU s  chunks  chunks/s  peak RSS MB   nDCG@10  R@5
    citewise openvino-f32      0.12    441.3    847.1  11,878      26.9          540    0.7276 0.7889
    LlamaIndex                 2.08    285.5    555.2   5,196      18.2          877
    citewise openvino-f32 / LlamaIndex wall time: 1.55x

Here both float32 paths run the model at ~6.1k word pieces a second: at ~23 MFLOP a word piece,
143 GFLOP/s, where two AVX2 cores peak at 144 at their nominal 2.25 GHz (more when they boost),
so float32 has little left to give; and no int8 graph is faster (``python -m
benchmarks.quantized`` the same day: int8 dynamic 0.99x, blockwise 0.55x float32's speed). What
is left is the word pieces: citewise embeds 2.4 million (every piece of text, the title line on
each chunk, the overlap of split paragraphs), LlamaIndex 1.2 million (each node cut at 256).
Without the repeated text, ~1.63 million, it would still be ~1.1x, and ``repeated_text.py``
found that dropping it costs retrieval or answers.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, replace
from pathlib import Path

from benchmarks.benchcache import conditions, host, shared_data

ROOT = Path(__file__).resolve().parent.parent


def machine_cpu_seconds() -> float:
    """user + nice + system jiffies of all CPUs since boot, in seconds."""
    fields = Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]
    return (int(fields[0]) + int(fields[1]) + int(fields[2])) / os.sysconf("SC_CLK_TCK")


def tree_rss_mb(pid: int) -> float:
    """The largest resident set (MB) among ``pid`` and its descendants."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            parts = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(parts[1]), []).append(int(stat.parent.name))
    best, todo = 0, [pid]
    while todo:
        p = todo.pop()
        todo += children.get(p, [])
        try:
            for line in Path(f"/proc/{p}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    best = max(best, int(line.split()[1]))
        except OSError:
            pass
    return best / 1024


@dataclass(frozen=True)
class Run:
    label: str
    wall: float
    cpu: float
    rss_mb: float
    load: float
    stdout: str


def measure(label: str, cmd: list[str], env: dict[str, str] | None = None) -> Run:
    load = os.getloadavg()[0]
    cpu0, t0 = machine_cpu_seconds(), time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env={**os.environ, **(env or {})})
    peak = [0.0]

    def sample() -> None:
        while proc.poll() is None:
            peak[0] = max(peak[0], tree_rss_mb(proc.pid))
            time.sleep(0.2)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    out, err = proc.communicate()
    wall, cpu = time.perf_counter() - t0, machine_cpu_seconds() - cpu0
    sampler.join()
    if proc.returncode:
        raise SystemExit(f"{label} failed ({proc.returncode}):\n{err[-3000:]}")
    return Run(label, wall, cpu, peak[0], load, out)


def chunks_in(db: Path, kb: str) -> tuple[int, str]:
    """The chunks ingest stored, and the execution path it recorded ("" for other embedders)."""
    from citewise.stores import open_store

    store = open_store(str(db))
    try:
        found = store.get_kb(kb)
        return store.count_chunks(found), found.config.embed_path
    finally:
        store.close()


def quality(db: Path, data: Path) -> tuple[float, float, str]:
    """Hybrid nDCG@10 and recall@5 of the 300 SciFact test claims on the store ingest built
    (questions embedded on the path its vectors were, as ask does), and that path."""
    from benchmarks.scifact import load as load_claims
    from citewise.calibrate import evaluation
    from citewise.engine import Engine
    from citewise.stores import open_store

    store = open_store(str(db))
    try:
        kb = store.get_kb("bench")
        report = evaluation.evaluate(Engine(store), kb, load_claims(data, "test"), ("hybrid",),
                                     answers=False)
        means = report.means["hybrid"]
        return means["ndcg@10"], means["recall@5"], kb.config.embed_path or "-"
    finally:
        store.close()


def cpu_features() -> str:
    """The CPU flags the execution paths depend on, and what OpenVINO says it computes."""
    from citewise.embedders import runtimes

    flags = set()
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("flags"):
            flags = set(line.split(":", 1)[1].split())
            break
    shown = [f for f in ("avx2", "avx512f", "avx512_vnni", "avx512_bf16", "amx_bf16", "amx_int8")
             if f in flags]
    return (f"CPU flags: {' '.join(shown) or 'none of avx2/avx512/amx'}; OpenVINO computes: "
            f"{' '.join(sorted(runtimes.capabilities())) or '- (not installed)'}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--docs", type=int, default=0, help="only the first N documents (0: all)")
    ap.add_argument("--corpus", type=Path, help="a BEIR corpus.jsonl [default: SciFact's]")
    ap.add_argument("--embedder", help="embedder spec [default: citewise's default]")
    ap.add_argument("--vs", choices=["llamaindex"], help="also run the LlamaIndex ingestion")
    ap.add_argument("--llama-python", default=sys.executable,
                    help="a Python with the bench extra, for --vs llamaindex [default: this one]")
    ap.add_argument("--ray", default="1,2", help="Ray worker counts to run ('' for none)")
    ap.add_argument("--paths", default="", help="the local model's execution paths to ingest "
                    "with, comma-separated, each a row (CITEWISE_EMBED_PATH; '' the host's "
                    "fastest, e.g. 'onnxruntime-fp32,' for before and after) [default: '']")
    args = ap.parse_args()
    print(host(), cpu_features(), sep="\n", flush=True)
    whole_scifact = not args.corpus and not args.docs
    corpus = args.corpus or shared_data("scifact") / "corpus.jsonl"
    runs: list[tuple[Run, int]] = []
    scores: dict[str, tuple[float, float, str]] = {}
    with tempfile.TemporaryDirectory(prefix="citewise-ingest-bench-") as tmp:
        source = Path(tmp) / "corpus.jsonl"
        with corpus.open(encoding="utf-8") as f:
            lines = [line for line in f if line.strip()]
        source.write_text("".join(lines[: args.docs] if args.docs else lines), encoding="utf-8")
        docs = len(lines[: args.docs] if args.docs else lines)
        extra = ["--embedder", args.embedder] if args.embedder else []
        paths: list[tuple[str, list[str], str]] = [
            (f"citewise {p or 'fastest'}", [], p) for p in args.paths.split(",")] + [
            (f"ray, {n} worker{'s' * (n > 1)}", ["--ray", "local", "--ray-workers", str(n)], "")
            for n in (int(x) for x in args.ray.split(",") if x.strip())
        ]
        for label, flags, path in paths:
            db = Path(tmp) / f"{len(runs)}.db"
            cmd = [sys.executable, "-m", "citewise", "--db", str(db), "ingest", "--kb", "bench",
                   "--quiet", *extra, str(source), *flags]
            run = measure(label, cmd, env={"CITEWISE_EMBED_PATH": path})
            chunks, recorded = chunks_in(db, "bench")
            if not path and recorded and not flags:  # say which path the host's fastest was
                run = replace(run, label=f"citewise {recorded}")
            runs.append((run, chunks))
            print(f"done: {label} {run.wall:.1f}s", file=sys.stderr, flush=True)
            if whole_scifact:  # not timed: after the run
                scores[run.label] = quality(db, corpus.parent)
        if args.vs:
            run = measure("LlamaIndex", [args.llama_python, "-m", "benchmarks.llama_ingest",
                                         str(source)], env={"PYTHONPATH": str(ROOT)})
            runs.append((run, json.loads(run.stdout.strip().splitlines()[-1])["nodes"]))
    print(f"\n{docs:,} documents from {corpus.parent.name}; {os.cpu_count()} cores; "
          f"embedder {args.embedder or 'default'}")
    print(f"{'path':<25} {'load':>5} {'wall s':>8} {'CPU s':>8} {'chunks':>7} {'chunks/s':>9} "
          f"{'peak RSS MB':>12}" + ("   hybrid nDCG@10  R@5 (SciFact test)" if scores else ""))
    for run, chunks in runs:
        score = scores.get(run.label)
        print(f"{run.label:<25} {run.load:5.2f} {run.wall:8.1f} {run.cpu:8.1f} {chunks:7,} "
              f"{chunks / run.wall:9.1f} {run.rss_mb:12.0f}"
              + (f"   {score[0]:>14.4f} {score[1]:.4f}  on {score[2]}" if score else ""))
    llama = next((r for r, _ in runs if r.label == "LlamaIndex"), None)
    for run, _ in runs:
        if llama is not None and run.label.startswith("citewise"):
            print(f"{run.label} / LlamaIndex wall time: {run.wall / llama.wall:.2f}x")
    print(conditions())


if __name__ == "__main__":
    main()
