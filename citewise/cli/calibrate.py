"""``citewise calibrate``: set a knowledge base's refusal gate from labelled questions.

``--json`` prints one object (keys are only added within a major version)::

    {"kb": str, "file": str, "queries": int, "policy": str, "threshold": float,
     "max_covered_refusal": float, "confidence": 0.95,
     "buckets": [{"bucket", "n", "refused", "rate", "low", "high"}],   # at the chosen threshold
     "compared": [{"policy", "threshold", "score", "auc", "buckets": [...]}],
     "related_floor": float | null, "embedder": str, "fingerprint": str,
     "stored": bool, "plot": str | null,
     "end_to_end": {...} | null}   # at the chosen gate, as in `eval --json`; null with --gate-only
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import typer
from tqdm import tqdm

from .. import calibration, end_to_end, gate
from ..errors import UnknownNameError
from ..querysets import load_queries
from .common import JSON_OPTION, KB_OPTION, engine, print_json


def _pct(x: float) -> str:
    return f"{x * 100:5.1f}%"


def calibrate(
    ctx: typer.Context,
    queries: Path = typer.Argument(
        ..., help="Labelled questions: JSONL with id, query, expect (answer|refuse), sources, bucket."
    ),
    kb: str = KB_OPTION,
    max_covered_refusal: float = typer.Option(
        0.05, "--max-covered-refusal", min=0.0, max=0.99,
        help="The largest share of covered questions the gate may refuse.",
    ),
    policy: str = typer.Option(
        "auto", help="top1, mean, coverage, combined[:W] (top1 + W x coverage), or auto "
        "(the one that separates best on these questions).",
    ),
    plot: Path = typer.Option(None, "--plot", help="Write refusal rate against threshold to this PNG."),
    save: bool = typer.Option(True, "--save/--no-save", help="Store the chosen gate on the knowledge base."),
    gate_only: bool = typer.Option(False, "--gate-only", help="Report the gate alone: do not ask "
                                   "the questions end to end at the chosen gate."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress bar."),
    as_json: bool = JSON_OPTION,
) -> None:
    """Run labelled questions through retrieval, choose the refusal policy and threshold that
    refuse the most thin and out-of-scope questions while refusing at most the given share of
    covered ones, print each bucket's refusal rate with an exact 95% interval, and store the
    gate on the knowledge base with the embedder and retrieval settings it holds for. Then each
    question is asked end to end at the chosen gate (generator and citation check too, the query
    log untouched) and its refusal rates are printed beside the gate's."""
    if policy != "auto":
        try:
            policy = gate.get_policy(policy).spec
        except UnknownNameError:
            raise UnknownNameError("gate policy", policy, [*gate.POLICIES, "auto"]) from None
    eng = engine(ctx)
    the_kb = eng.store.get_kb(kb)
    labelled = load_queries(queries)
    with tqdm(total=len(labelled), unit="q", desc=f"calibrate {kb}", disable=quiet or as_json,
              leave=False) as bar:
        observations = calibration.collect(eng, the_kb, labelled, progress=bar.update)
    result = calibration.calibrate(observations, policy, max_covered_refusal)
    setting = calibration.setting_for(the_kb.config, result, queries.name)
    if save:
        eng.store.update_kb(kb, replace(the_kb.config, gate=setting))
    e2e = None
    if not gate_only:
        gated = replace(the_kb, config=replace(the_kb.config, gate=setting))
        with tqdm(total=len(labelled), unit="q", desc=f"end to end {kb}",
                  disable=quiet or as_json, leave=False) as bar:
            outcomes = end_to_end.run(eng, gated, labelled, progress=bar.update)
        e2e = end_to_end.summarise(outcomes, gated.config.generator)
    if plot is not None:
        from ..calibration_plot import plot as draw

        draw(observations, result, plot)
    chosen = result.chosen
    if as_json:
        print_json({
            "kb": kb, "file": str(queries), "queries": result.n, "policy": chosen.policy,
            "threshold": chosen.threshold, "max_covered_refusal": max_covered_refusal,
            "confidence": calibration.CONFIDENCE,
            "buckets": [r.as_dict() for r in chosen.rates],
            "compared": [{"policy": p.policy, "threshold": p.threshold,
                          "score": round(p.score, 4), "auc": round(p.auc, 4),
                          "buckets": [r.as_dict() for r in p.rates]} for p in result.compared],
            "related_floor": None if result.related_floor is None else round(result.related_floor, 4),
            "embedder": the_kb.config.embedder, "fingerprint": the_kb.config.fingerprint(),
            "stored": save, "plot": None if plot is None else str(plot),
            "end_to_end": None if e2e is None else end_to_end.to_dict(e2e),
        })
        return
    typer.echo(f"{kb}: {result.n} labelled questions from {queries.name}; at most "
               f"{max_covered_refusal:.0%} of covered questions may be refused")
    typer.echo(f"policy {chosen.policy}, threshold {chosen.threshold:.4f}"
               + (" (stored on the knowledge base)" if save else " (not stored: --no-save)"))
    typer.echo(calibration.rate_table([("chosen", chosen.policy, chosen.threshold, chosen.rates)]))
    if e2e is not None:
        typer.echo("\n" + end_to_end.table(e2e))
    if len(result.compared) > 1:
        typer.echo("\npolicies compared (mean refusal of the refuse buckets at each one's threshold):")
        for p in sorted(result.compared, key=lambda p: -p.score):
            mark = "*" if p is chosen else " "
            typer.echo(f"  {mark} {p.policy:<14} threshold {p.threshold:7.4f}   refuses {_pct(p.score)}"
                       f"   AUC {p.auc:.3f}")
    typer.echo(f"\nThe gate holds for {the_kb.config.embedder} with the knowledge base's current "
               "retrieval settings; if either changes, `ask` warns until you calibrate again.")
    typer.echo("These rates are measured on the questions the threshold was chosen from; "
               "check them on held-out questions.")
    if plot is not None:
        typer.echo(f"plot written to {plot}")


def register(app: typer.Typer) -> None:
    app.command()(calibrate)
