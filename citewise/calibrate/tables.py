"""Plain-text tables of a calibration: the policies compared out of fold, each signal's ROC
AUC, and what each calibrated policy does to held-out questions (gate alone and end to end)."""

from __future__ import annotations

from collections.abc import Sequence

from citewise.calibrate.calibration import Calibration, PolicyResult, rates_at
from citewise.calibrate.rates import Rate
from citewise.calibrate.thresholds import Observation


def _pct(x: float) -> str:
    return f"{x * 100:5.1f}%"


def comparison(result: Calibration) -> str:
    """Each policy's threshold, its refusals on the labelled questions, and out of fold."""
    where = "end to end" if result.end_to_end else "gate alone"
    if result.folds:
        lines = [f"policies compared ({where}; out of fold: {result.folds}-fold cross-validation, "
                 "each fitted without the fold it is judged on; auto keeps the best balance, "
                 "refuse-bucket mean minus covered):"]
    else:
        lines = [f"policies compared ({where}, on these questions: too few for cross-validation):"]
    buckets = [r.bucket for r in result.chosen.counted]
    lines.append(f"    {'policy':<16}{'threshold':>10}{'refuses':>9}{'AUC':>7}"
                 + "".join(f"{'oof ' + b:>19}" for b in buckets) + f"{'balance':>9}")
    ranked = sorted(result.compared, key=lambda p: -(p.balance if p.balance is not None else p.score))
    for p in ranked:
        mark = "*" if p is result.chosen else " "
        oof = {r.bucket: r for r in p.out_of_fold or ()}
        cells = "".join(f"{_pct(oof[b].rate) + f' ({oof[b].refused}/{oof[b].n})':>19}"
                        if b in oof else f"{'-':>19}" for b in buckets)
        balance = f"{p.balance:>9.3f}" if p.balance is not None else f"{'-':>9}"
        lines.append(f"  {mark} {p.policy:<16}{p.threshold:>10.4f}{_pct(p.score):>9}{p.auc:>7.3f}"
                     f"{cells}{balance}")
    return "\n".join(lines)


def signals(result: Calibration) -> str:
    lines = ["signals, ROC AUC of covered questions against each bucket:",
             f"  {'signal':<16}{'thin':>7}{'out of scope':>14}"]
    for s in result.signals:
        lines.append(f"  {s.signal:<16}{s.thin:>7.3f}{s.out_of_scope:>14.3f}")
    return "\n".join(lines)


def _cell(r: Rate) -> str:
    return f"{r.rate * 100:5.1f}% [{r.low * 100:4.1f}, {r.high * 100:5.1f}]"


def held_out(rows: Sequence[tuple[str, PolicyResult]], held: Sequence[Observation]) -> str:
    """For each ``(label, policy calibrated elsewhere)``: its refusal rate per bucket on the
    ``held`` questions with exact 95% intervals, the gate alone and (when they were asked)
    end to end."""
    asked = bool(held) and all(o.after_gate is not None for o in held)
    first = rates_at(held, "top1", 0.0)
    head = f"{'':<22}{'policy':<16}{'threshold':>10}  {'':<11}"
    head += "".join(f"{r.bucket + f' (n={r.n})':<26}" for r in first)
    lines = [head.rstrip()]
    for label, p in rows:
        kinds = [("gate", False)] + ([("end to end", True)] if asked else [])
        for i, (kind, e2e) in enumerate(kinds):
            rates = rates_at(held, p.policy, p.threshold, model=p.model, end_to_end=e2e)
            lead = (f"{label:<22}{p.policy:<16}{p.threshold:>10.4f}  " if i == 0
                    else " " * 50)
            lines.append(f"{lead}{kind:<11}" + "".join(f"{_cell(r):<26}" for r in rates).rstrip())
    return "\n".join(lines)
