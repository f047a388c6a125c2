"""Measure the shipped default gate for an embedder on labelled *train* questions.

    python -m benchmarks.default_gate [--embedder local:all-MiniLM-L6-v2] [--report-test]

Ingests the sample collection, runs examples/queries/smoking-cessation.train.jsonl through
retrieval, and calibrates every policy with the same sweep as `citewise calibrate`
(citewise/calibrate/calibration.py: at most 5% of covered questions refused, the threshold midway
between the lowest covered value kept and the next value below). It prints each policy's
value range per bucket, its threshold and train refusal rates, and the related-topics floor.
The numbers it prints are the ones in citewise/answer/gate.py. The test split is read only with
``--report-test``, after everything is chosen, to report each policy's held-out refusal rates.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import numpy as np

from citewise.answer import gate
from citewise.calibrate import calibration, end_to_end
from citewise.calibrate import tables as calibration_tables
from citewise.calibrate.querysets import load_queries
from citewise.engine import Engine
from citewise.stores.sqlite import open_sqlite

ROOT = Path(__file__).resolve().parent.parent

MAX_COVERED_REFUSAL = 0.05


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--embedder", default="local:all-MiniLM-L6-v2")
    ap.add_argument("--report-test", action="store_true",
                    help="after choosing on train, report held-out rates on the test split")
    ap.add_argument("--gate-only", action="store_true",
                    help="count the gate alone: do not ask the questions end to end")
    args = ap.parse_args()
    queries = load_queries(ROOT / "examples/queries/smoking-cessation.train.jsonl")
    test: list[calibration.Observation] = []
    with tempfile.TemporaryDirectory() as tmp:
        engine = Engine(open_sqlite(Path(tmp) / "gate.db"))
        kb = engine.open_kb("sample", embedder=args.embedder)
        engine.ingest(kb, [ROOT / "examples/smoking-cessation"])
        observations = calibration.collect(engine, kb, queries, answers=not args.gate_only)
        if args.report_test:
            test = calibration.collect(
                engine, kb, load_queries(ROOT / "examples/queries/smoking-cessation.test.jsonl"),
                answers=not args.gate_only)
        default = gate.default_setting(kb.config)
    result = calibration.calibrate(observations, "auto", MAX_COVERED_REFUSAL)
    print(f"embedder {args.embedder}, {len(queries)} train questions, at most "
          f"{MAX_COVERED_REFUSAL:.0%} of covered refused, counted "
          f"{'end to end' if result.end_to_end else 'at the gate'}")
    print(f"{'policy':<16} {'bucket':<13} {'n':>3} {'min':>7} {'median':>7} {'max':>7}")
    for p in result.compared:
        v = calibration.values(observations, p.policy, p.model)
        for rate in p.rates:
            mine = v[[o.bucket == rate.bucket for o in observations]]
            print(f"{p.policy:<16} {rate.bucket:<13} {rate.n:>3} {mine.min():7.3f} "
                  f"{np.median(mine):7.3f} {mine.max():7.3f}")
        print(f"  -> threshold {p.threshold:.3f}; train refusal "
              + ", ".join(f"{r.bucket} {r.rate:.0%} [{r.low:.0%}, {r.high:.0%}]" for r in p.counted)
              + f"; AUC {p.auc:.3f}")
    print("\n" + calibration_tables.comparison(result))
    print("\n" + calibration_tables.signals(result))
    print(f"auto would choose {result.chosen.policy} at {result.chosen.threshold:.3f}")
    if result.related_floor is not None:
        print(f"related-topics floor (95th percentile of out-of-scope top-1): {result.related_floor:.3f}")

    if test:
        print(f"\nheld out: the {len(test)} test questions at each policy's train threshold "
              "(* auto's choice), the gate alone and end to end")
        rows = [(("* " if p is result.chosen else "  ") + "train", p) for p in result.compared]
        rows.append(("  shipped default", calibration.PolicyResult(
            default.policy, default.threshold, (), 0.0, float("nan"))))
        print(calibration_tables.held_out(rows, test))
        if not args.gate_only:
            chosen = result.chosen
            the_gate = gate.ThresholdGate(chosen.policy, chosen.threshold, model=chosen.model)
            print("\n" + end_to_end.table(end_to_end.summarise(end_to_end.at_gate(test, the_gate),
                                                               "extractive")))


if __name__ == "__main__":
    main()
