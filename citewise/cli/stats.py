"""``citewise stats``: refusal health from the query log, its 24-hour moving average, the alarm."""

from __future__ import annotations

import typer

from citewise.cli.common import JSON_OPTION, KB_OPTION, engine, print_json
from citewise.telemetry.metrics import AlarmRule, Figures, kb_stats

SINCE_OPTION = typer.Option(None, "--since", help="Only questions at or after this ISO date/time (UTC).")


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{x:.1%}"


def _num(x: float | None) -> str:
    return "-" if x is None else f"{x:.3f}"


def _summary(f: Figures) -> str:
    refused = ", ".join(f"{p} {_pct(v)}" for p, v in f.refusal_share.items()) or "-"
    return (f"{f.n} questions: answered {_pct(f.answered_share)}; refused by {refused}; "
            f"empty context {_pct(f.empty_context_rate)}; mean top-1 {_num(f.mean_top1)}, "
            f"mean context cosine {_num(f.mean_context_cosine)}; hit rate {_pct(f.hit_rate)} "
            f"({f.rated} rated)")


def stats(
    ctx: typer.Context,
    kb: str = KB_OPTION,
    since: str = SINCE_OPTION,
    hours: int = typer.Option(24, min=1, help="Hourly moving-average points to print (text output)."),
    answered_drop: float = typer.Option(
        10.0, help="Alarm when the 24 h answered share is this many points below its 7-day level."),
    top1_drop: float = typer.Option(
        0.05, help="Alarm when the 24 h mean top-1 cosine is this much below its 7-day level."),
    min_questions: int = typer.Option(20, help="Questions each alarm window needs to judge."),
    as_json: bool = JSON_OPTION,
) -> None:
    """A knowledge base's refusal health, from its query log.

    Answered share, refusals by path, empty-context rate, mean cosines, feedback hit rate and
    latency per stage: overall and as a 24-hour moving average by hour, with the alarm."""
    eng = engine(ctx)
    rule = AlarmRule(answered_drop, top1_drop, min_questions=min_questions)
    result = kb_stats(eng.store, eng.store.get_kb(kb), since=since, rule=rule)
    if as_json:
        print_json(result.to_dict())
        return
    o = result.overall
    typer.echo(f"{kb} since {result.since or 'the first question'} (now {result.now})")
    typer.echo("  " + _summary(o))
    if o.latency:
        typer.echo("  latency ms (p50 / p95): " + ", ".join(
            f"{stage.removesuffix('_ms')} {q['p50']:.1f} / {q['p95']:.1f}" for stage, q in o.latency.items()))
    typer.echo(f"\n24-hour moving average, last {hours} hours (hour start, UTC):")
    typer.echo(f"  {'hour':<25} {'n':>5} {'answered':>9} {'empty':>7} {'top-1':>6} {'ctx cos':>7} "
               f"{'hit':>6} {'p95 ms':>8}")
    for hour, f in result.hourly[-hours:]:
        p95 = f.latency.get("total_ms", {}).get("p95")
        typer.echo(f"  {hour:<25} {f.n:>5} {_pct(f.answered_share):>9} "
                   f"{_pct(f.empty_context_rate):>7} {_num(f.mean_top1):>6} "
                   f"{_num(f.mean_context_cosine):>7} {_pct(f.hit_rate):>6} "
                   f"{'-' if p95 is None else f'{p95:.1f}':>8}")
    a = result.alarm
    state = "FIRING" if a.firing else "ok"
    typer.secho(f"\nalarm: {state}", fg="red" if a.firing else None)
    for reason in a.reasons:
        typer.echo(f"  - {reason}")
    typer.echo(f"  last {a.rule.recent_hours} h: {_summary(a.recent)}")
    typer.echo(f"  {a.rule.baseline_days} days before: {_summary(a.baseline)}")


def register(app: typer.Typer) -> None:
    app.command()(stats)
