"""What the reader costs a question: ``ask`` p50 / p99, warm and cold, reader on and off.

    python -m benchmarks.ask_latency [--cold-runs 7]

Warm: the sample collection (its 157 train and test questions) and SciFact (the 300 test
claims, the knowledge base of ``benchmarks.scifact`` in ``.bench/``) asked one at a time
through ``Engine.ask`` (gate, extractive answer, citation check, as ``citewise ask``), each
question asked with the reader on (``reader=auto``, the default) and off (``reader=none``) in
turn, after one warm-up pass over every question so that both sides run with the model and
the stores' pages loaded; the reader's remembered readings are dropped before every question
(a new question reads everything it needs). Cold: a new ``citewise ask`` process on the sample,
reader on and off in turn, ``--cold-runs`` each, for a question it answers (nothing is read)
and one it refuses (the reader is loaded to name the closest passage), the graphs already built
in the user cache as after the first run: wall time of the whole process.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

from benchmarks.benchcache import build_or_reuse, conditions, host, p50_p99, shared_data
from benchmarks.scifact import load
from citewise.calibrate.querysets import load_queries
from citewise.engine import Engine
from citewise.ingest.documents import load_beir
from citewise.kb import KnowledgeBase
from citewise.reader import get_reader
from citewise.stores.sqlite import open_sqlite

ROOT = Path(__file__).resolve().parent.parent
ANSWERED = "How long do nicotine withdrawal symptoms last?"
REFUSED = "What is the best way to bake sourdough bread?"  # a refusal reads 4 units


def timed(engine: Engine, kbs: dict[str, KnowledgeBase], questions: list[str]) -> dict[str, list[float]]:
    """Milliseconds per question on each side, the sides in turn per question."""
    reader = get_reader("citewise-reader")
    assert reader is not None
    for question in questions:  # warm-up: pages, graphs, caches of both sides
        for kb in kbs.values():
            engine.ask(kb, question, log=False)
    out: dict[str, list[float]] = {side: [] for side in kbs}
    for question in questions:
        for side, kb in kbs.items():
            reader.forget()
            t = time.perf_counter()
            engine.ask(kb, question, log=False)
            out[side].append((time.perf_counter() - t) * 1000)
    return out


def sides(engine: Engine, kb: KnowledgeBase) -> dict[str, KnowledgeBase]:
    """The knowledge base as it is (reader on) and a copy of its config with the reader off."""
    return {"reader on": replace(kb, config=replace(kb.config, reader="auto")),
            "reader off": replace(kb, config=replace(kb.config, reader="none"))}


def cold(db: Path, question: str, runs: int) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {"reader on": [], "reader off": []}
    for _ in range(runs):
        for side, reader in (("reader on", "auto"), ("reader off", "none")):
            subprocess.run([sys.executable, "-m", "citewise", "--db", str(db), "kb", "set", "sample",
                            f"reader={reader}"], check=True, capture_output=True)
            t = time.perf_counter()
            subprocess.run([sys.executable, "-m", "citewise", "--db", str(db), "ask", "--kb", "sample",
                            question], check=True, capture_output=True)
            out[side].append((time.perf_counter() - t) * 1000)
    return out


def row(name: str, found: dict[str, list[float]]) -> str:
    on, off = found["reader on"], found["reader off"]
    return (f"{name:<28} {len(on):>4} {p50_p99(off):>14} {p50_p99(on):>14} "
            f"{statistics.median(on) - statistics.median(off):>+9.1f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cold-runs", type=int, default=7)
    args = ap.parse_args()
    print(host())
    print(f"{'ask, ms':<28} {'n':>4} {'off p50/p99':>14} {'on p50/p99':>14} {'p50 +ms':>9}")
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "sample.db"
        store = open_sqlite(db)
        engine = Engine(store)
        kb = engine.open_kb("sample")
        engine.ingest(kb, [ROOT / "examples/smoking-cessation"])
        questions = [q.query for split in ("train", "test") for q in
                     load_queries(ROOT / f"examples/queries/smoking-cessation.{split}.jsonl")]
        print(row("sample, warm", timed(engine, sides(engine, kb), questions)), flush=True)
        store.close()
        print(row("sample, cold, answered", cold(db, ANSWERED, args.cold_runs)), flush=True)
        print(row("sample, cold, refused", cold(db, REFUSED, args.cold_runs)), flush=True)
    data = shared_data("scifact")
    built = build_or_reuse("scifact", lambda: load_beir(data / "corpus.jsonl"))
    claims = [q.query for q in load(data, "test")]
    print(row("scifact test claims, warm", timed(built.engine, sides(built.engine, built.kb), claims)))
    print(conditions())
    print("targets (issue #30): warm p50 +40 ms at most on each; cold +150 ms at most")


if __name__ == "__main__":
    main()
