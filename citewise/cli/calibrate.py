"""``citewise calibrate``: set a knowledge base's refusal gate from labelled questions.

``--json`` prints one object (keys are only added within a major version)::

    {"kb": str, "file": str, "queries": int, "policy": str, "threshold": float,
     "max_covered_refusal": float, "confidence": 0.95,     # of the intervals
     "rule": "point" | "guarantee", "guarantee": {"confidence", "covered", "refused", "allowed",
                                                  "upper"} | null,
     "counted": "end_to_end" | "gate", "folds": int,
     "buckets": [{"bucket", "n", "refused", "rate", "low", "high"}],   # the gate, chosen threshold
     "compared": [{"policy", "threshold", "score", "auc", "buckets": [...],
                   "end_to_end_buckets": [...] | null, "out_of_fold": [...] | null,
                   "balance": float | null, "model": {...} | null}],
     "signals": [{"signal", "auc_thin", "auc_out_of_scope"}],
     "model": {"features", "mean", "scale", "coef", "intercept"} | null,   # learned only
     "related_floor": float | null, "embedder": str, "fingerprint": str,
     "stored": bool, "plot": str | null,
     "end_to_end": {...} | null}   # at the chosen gate, as in `eval --json`; null with --gate-only
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import typer
from tqdm import tqdm

from citewise.answer import gate
from citewise.calibrate import calibration, end_to_end
from citewise.calibrate import tables as calibration_tables
from citewise.calibrate.querysets import load_queries
from citewise.calibrate.thresholds import spec_of
from citewise.cli.common import JSON_OPTION, KB_OPTION, engine, print_json
from citewise.errors import UnknownNameError


def calibrate(
    ctx: typer.Context,
    queries: Path = typer.Argument(
        ..., help="Labelled questions: JSONL with id, query, expect (answer|refuse), sources, bucket."
    ),
    kb: str = KB_OPTION,
    max_covered_refusal: float = typer.Option(
        0.05, "--max-covered-refusal", min=0.0, max=0.99,
        help="The largest share of covered questions `ask` may refuse (the gate and the citation "
        "check; the gate alone with --gate-only).",
    ),
    confidence: float = typer.Option(
        None, "--confidence", min=0.5, max=0.999,
        help="Certify the budget: choose the threshold whose exact upper bound on covered "
        "refusal, at this confidence, is within --max-covered-refusal (e.g. 0.95). Without it, "
        "the share refused on these questions is kept within the budget (a point estimate).",
    ),
    policy: str = typer.Option(
        "auto", help="A signal (top1, mean, pool, coverage, margin, sentence_terms, "
        "sentence_cosine, agreement, kb_terms), combined[:W] (top1 + W x coverage), grounded[:W] "
        "(sentence_cosine - W x (1 - kb_terms)), learned (logistic "
        "regression over the signals), or auto (the one that does best out of fold).",
    ),
    plot: Path = typer.Option(None, "--plot", help="Write refusal rate against threshold to this PNG."),
    save: bool = typer.Option(True, "--save/--no-save", help="Store the chosen gate on the knowledge base."),
    gate_only: bool = typer.Option(False, "--gate-only", help="Count the gate alone: ask no "
                                   "question end to end, call no generator (e.g. to spare a "
                                   "hosted one)."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress bar."),
    as_json: bool = JSON_OPTION,
) -> None:
    """Choose a knowledge base's refusal gate from labelled questions.

    Run labelled questions through retrieval and ask each end to end (generator and citation
    check too, the gate open, the query log untouched); choose the refusal policy and the
    threshold that refuse the most thin and out-of-scope questions while `ask` refuses at most
    the given share of covered ones; print each bucket's refusal rate, gate alone and end to
    end, with exact 95% intervals, each policy's out-of-fold rates and each signal's ROC AUC;
    and store the gate on the knowledge base with the embedder and retrieval settings it holds
    for."""
    if policy != "auto":
        try:
            policy = spec_of(policy)
        except UnknownNameError:
            raise UnknownNameError("gate policy", policy, [*gate.POLICIES, "auto"]) from None
    eng = engine(ctx)
    the_kb = eng.store.get_kb(kb)
    labelled = load_queries(queries)
    with tqdm(total=len(labelled) * (1 if gate_only else 2), unit="q", desc=f"calibrate {kb}",
              disable=quiet or as_json, leave=False) as bar:
        observations = calibration.collect(eng, the_kb, labelled, progress=bar.update,
                                           answers=not gate_only)
    result = calibration.calibrate(observations, policy, max_covered_refusal,
                                   guarantee=confidence)
    setting = calibration.setting_for(the_kb.config, result, queries.name)
    if save:
        eng.store.update_kb(kb, replace(the_kb.config, gate=setting))
    e2e = None
    if not gate_only:
        the_gate = gate.ThresholdGate(setting.policy, setting.threshold,
                                      model=setting.details.get("model"))
        e2e = end_to_end.summarise(end_to_end.at_gate(observations, the_gate),
                                   the_kb.config.generator)
    if plot is not None:
        from citewise.calibrate.plot import plot as draw

        draw(observations, result, plot)
    chosen = result.chosen
    if as_json:
        print_json({
            "kb": kb, "file": str(queries), "queries": result.n, "policy": chosen.policy,
            "threshold": chosen.threshold, "max_covered_refusal": max_covered_refusal,
            "confidence": calibration.CONFIDENCE,
            "rule": "point" if confidence is None else "guarantee",
            "guarantee": None if confidence is None else _guarantee(chosen, confidence),
            "counted": "end_to_end" if result.end_to_end else "gate", "folds": result.folds,
            "buckets": [r.as_dict() for r in chosen.rates],
            "compared": [_compared(p) for p in result.compared],
            "signals": [{"signal": s.signal, "auc_thin": _round(s.thin),
                         "auc_out_of_scope": _round(s.out_of_scope)} for s in result.signals],
            "model": None if chosen.model is None else chosen.model.as_dict(),
            "related_floor": None if result.related_floor is None else round(result.related_floor, 4),
            "embedder": the_kb.config.embedder, "fingerprint": the_kb.config.fingerprint(),
            "stored": save, "plot": None if plot is None else str(plot),
            "end_to_end": None if e2e is None else end_to_end.to_dict(e2e),
        })
        return
    counted = "what `ask` returns (gate and citation check)" if result.end_to_end else "the gate alone"
    typer.echo(f"{kb}: {result.n} labelled questions from {queries.name}; at most "
               f"{max_covered_refusal:.0%} of covered questions may be refused, counted on {counted}"
               + ("" if confidence is None else f", certified at {confidence:.0%} confidence"))
    typer.echo(f"policy {chosen.policy}, threshold {chosen.threshold:.4f}"
               + (" (stored on the knowledge base)" if save else " (not stored: --no-save)"))
    if confidence is not None and chosen.upper is not None:
        typer.echo(f"guarantee: {chosen.allowed} covered refusals allowed; exact {confidence:.0%} "
                   f"upper bound on covered refusal at this threshold {chosen.upper:.1%}")
    if chosen.over_budget:
        typer.secho("warning: more covered questions are refused after the gate (citation check) "
                    "than the budget allows; the gate refuses only questions nothing was "
                    "retrieved for", fg="yellow", err=True)
    typer.echo(calibration.rate_table([("chosen", chosen.policy, chosen.threshold, chosen.rates)]))
    if e2e is not None:
        typer.echo("\n" + end_to_end.table(e2e))
    if chosen.model is not None:
        typer.echo("\nlearned model (standardised signals): "
                   + ", ".join(f"{f} {c:+.2f}" for f, c in zip(chosen.model.features,
                                                               chosen.model.coef, strict=True))
                   + f", intercept {chosen.model.intercept:+.2f}")
    if len(result.compared) > 1:
        typer.echo("\n" + calibration_tables.comparison(result))
    typer.echo("\n" + calibration_tables.signals(result))
    typer.echo(f"\nThe gate holds for {the_kb.config.embedder} with the knowledge base's current "
               "retrieval settings; if either changes, `ask` warns until you calibrate again.")
    typer.echo("These rates are measured on the questions the threshold was chosen from; "
               "check them on held-out questions.")
    if plot is not None:
        typer.echo(f"plot written to {plot}")


def _round(x: float) -> float | None:
    return None if x != x else round(x, 4)


def _compared(p: calibration.PolicyResult) -> dict:
    return {"policy": p.policy, "threshold": p.threshold, "score": round(p.score, 4),
            "auc": _round(p.auc), "buckets": [r.as_dict() for r in p.rates],
            "end_to_end_buckets": None if p.end_to_end is None else [r.as_dict() for r in p.end_to_end],
            "out_of_fold": None if p.out_of_fold is None else [r.as_dict() for r in p.out_of_fold],
            "balance": None if p.balance is None else round(p.balance, 4),
            "model": None if p.model is None else p.model.as_dict()}


def _guarantee(p: calibration.PolicyResult, confidence: float) -> dict:
    covered = next(r for r in p.counted if r.bucket == "covered")
    return {"confidence": confidence, "covered": covered.n, "refused": covered.refused,
            "allowed": p.allowed, "upper": None if p.upper is None else round(p.upper, 4)}


def register(app: typer.Typer) -> None:
    app.command()(calibrate)
