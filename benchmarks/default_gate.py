"""Measure the shipped default gate thresholds for an embedder on labelled *train* questions.

    python benchmarks/default_gate.py [--embedder local:all-MiniLM-L6-v2]

Ingests the sample collection, runs examples/queries/smoking-cessation.train.jsonl through
retrieval, and for each policy (top1, mean) prints the signal's range per bucket and the
threshold that refuses at most 5% of covered questions while refusing as many others as
possible (midway between the covered question it must keep and the next signal below).
The numbers it prints are the ones in citewise/gate.py. The test split is not read.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from citewise import gate  # noqa: E402
from citewise.engine import Engine  # noqa: E402
from citewise.stores.sqlite import SQLiteStore  # noqa: E402

MAX_COVERED_REFUSAL = 0.05


def choose(covered: list[float], others: list[float]) -> float:
    """Highest threshold refusing at most 5% of covered: keep the top 95% of covered answered."""
    c = np.sort(np.asarray(covered))
    allowed = int(np.floor(MAX_COVERED_REFUSAL * len(c)))
    keep_from = c[allowed]  # the lowest covered signal that must still be answered
    below = [x for x in [*c[:allowed], *others] if x < keep_from]
    return float((keep_from + max(below)) / 2) if below else float(keep_from)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--embedder", default="local:all-MiniLM-L6-v2")
    args = ap.parse_args()
    queries = [json.loads(x) for x in (ROOT / "examples/queries/smoking-cessation.train.jsonl").open()]
    with tempfile.TemporaryDirectory() as tmp:
        engine = Engine(SQLiteStore(Path(tmp) / "gate.db"))
        kb = engine.open_kb("sample", embedder=args.embedder)
        engine.ingest(kb, [ROOT / "examples/smoking-cessation"])
        by_bucket: dict[str, dict[str, list[float]]] = {}
        for q in queries:
            found = engine.retrieve(kb, q["query"])
            s = gate.signals(found.context, found.candidates)
            b = by_bucket.setdefault(q["bucket"], {"top1": [], "mean": []})
            b["top1"].append(s.top1)
            b["mean"].append(s.mean)
    print(f"embedder {args.embedder}, {len(queries)} train questions")
    print(f"{'policy':<6} {'bucket':<13} {'n':>3} {'min':>6} {'median':>7} {'max':>6}")
    for policy in ("top1", "mean"):
        for bucket, sig in by_bucket.items():
            v = np.asarray(sig[policy])
            print(f"{policy:<6} {bucket:<13} {len(v):>3} {v.min():6.3f} {np.median(v):7.3f} {v.max():6.3f}")
        covered = by_bucket["covered"][policy]
        others = by_bucket.get("out_of_scope", {}).get(policy, [])
        t = choose(covered, others)
        rates = {b: float(np.mean(np.asarray(s[policy]) < t)) for b, s in by_bucket.items()}
        print(f"  -> threshold {t:.3f}; refusal rate " + ", ".join(f"{b} {r:.0%}" for b, r in rates.items()))


if __name__ == "__main__":
    main()
