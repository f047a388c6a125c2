"""``citewise eval``: retrieval metrics, and gate-only and end-to-end refusal rates of a labelled
query set."""

from __future__ import annotations

from pathlib import Path

import typer
from tqdm import tqdm

from citewise.calibrate.end_to_end import table
from citewise.calibrate.evaluation import METRICS, MODES, EvalReport, check_modes, evaluate, to_dict
from citewise.calibrate.querysets import load_queries
from citewise.cli.common import JSON_OPTION, KB_OPTION, engine, one_of, print_json


def render(report: EvalReport) -> str:
    """The human table: one row per mode, then the refusal rate per bucket of the gate alone
    and, when answers were asked, of what ``ask`` returned."""
    lines = [f"{report.kb}: {report.queries} queries, {report.judged} with relevant documents "
             "(document level: a document counts once, at its best chunk)"]
    if report.judged:
        lines.append(f"{'mode':<11}" + "".join(f"{m:>10}" for m in METRICS))
        for mode in report.modes:
            lines.append(f"{mode:<11}" + "".join(f"{report.means[mode][m]:>10.3f}" for m in METRICS))
    if report.labelled:
        lines.append("")
        lines.append(f"gate {report.gate_policy} >= {report.gate_threshold:.3f}: answered "
                     f"{report.answered}/{report.labelled} ({report.answered_share:.1%})")
        if report.end_to_end is not None:
            lines.append(table(report.end_to_end))
            return "\n".join(lines)
        lines.append(f"{'bucket':<14}{'n':>5}{'refused':>9}{'rate':>8}  95% interval (exact)")
        for b in report.buckets:
            lines.append(f"{b.bucket:<14}{b.n:>5}{b.refused:>9}{b.rate:>8.1%}  "
                         f"[{b.low:6.1%}, {b.high:6.1%}]")
    return "\n".join(lines)


def eval_(
    ctx: typer.Context,
    queries: Path = typer.Argument(..., help="citewise query-set JSONL, or BEIR queries.jsonl "
                                   "with --qrels.", exists=True, dir_okay=False),
    kb: str = KB_OPTION,
    qrels: Path = typer.Option(None, "--qrels", exists=True, dir_okay=False,
                               help="BEIR qrels TSV giving the relevant documents of each query."),
    mode: list[str] = typer.Option(list(MODES), "--mode",
                                   help=f"Retrieval mode(s) to score, of {one_of(MODES)}; repeat "
                                   "the option for several."),
    gate_only: bool = typer.Option(False, "--gate-only",
                                   help="Run the gate alone: no answer is generated or checked "
                                   "(e.g. to spare a hosted generator)."),
    as_json: bool = JSON_OPTION,
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress bar."),
) -> None:
    """Score retrieval and refusals on a labelled query set.

    Score retrieval (recall@1/5/10, hit@5, MRR@10, nDCG@10 per mode) on a query set, and for
    labelled questions the refusal rate per bucket of the gate alone and end to end: each one
    asked as `ask` asks it (gate, the knowledge base's generator, citation check), with where
    refusals happened and how many covered questions were answered citing a labelled source.
    The query log is not written."""
    modes = check_modes(mode)
    labelled = load_queries(queries, qrels)
    eng = engine(ctx)
    the_kb = eng.store.get_kb(kb)
    with tqdm(total=len(labelled), unit="query", desc=f"eval {kb}", disable=quiet or as_json,
              leave=False) as bar:
        report = evaluate(eng, the_kb, labelled, modes, progress=bar.update, answers=not gate_only)
    if as_json:
        print_json(to_dict(report))
        return
    for w in report.gate_warnings if report.labelled else ():
        typer.secho(f"warning: {w}", fg="yellow", err=True)
    typer.echo(render(report))


def register(app: typer.Typer) -> None:
    app.command("eval")(eval_)
