"""``citewise log export|settings|feedback|tail``: the query log of one knowledge base."""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import typer

from citewise.cli.common import JSON_OPTION, KB_OPTION, engine, print_json
from citewise.cli.stats import SINCE_OPTION
from citewise.errors import ConfigError
from citewise.stores.base import LogEntry
from citewise.telemetry.log import export_jsonl, export_parquet, iso, with_policy

app = typer.Typer(help="Export the query log, set what it keeps, record feedback.",
                  no_args_is_help=True)


@app.command()
def export(
    ctx: typer.Context,
    out: Path = typer.Argument(..., help="File to write (.jsonl or .parquet)."),
    kb: str = KB_OPTION,
    since: str = SINCE_OPTION,
    fmt: str = typer.Option(None, "--format", help="jsonl or parquet [default: from the suffix]."),
    embeddings: bool = typer.Option(True, help="Include the query embeddings."),
    as_json: bool = JSON_OPTION,
) -> None:
    """Write the log to JSONL (one record a line) or Parquet (flat columns) for analysis."""
    fmt = fmt or ("parquet" if out.suffix == ".parquet" else "jsonl")
    if fmt not in ("jsonl", "parquet"):
        raise ConfigError(f"--format must be jsonl or parquet, not {fmt!r}")
    store = engine(ctx).store
    entries = store.query_log(store.get_kb(kb), since=iso(since), embeddings=embeddings)
    n = (export_parquet if fmt == "parquet" else export_jsonl)(entries, out)
    if as_json:
        print_json({"kb": kb, "file": str(out), "format": fmt, "entries": n})
        return
    typer.echo(f"wrote {n} log entries of {kb} to {out} ({fmt})")


@app.command()
def settings(
    ctx: typer.Context,
    kb: str = KB_OPTION,
    retention_days: int = typer.Option(None, min=1, help="Delete entries older than this many days."),
    keep_forever: bool = typer.Option(False, "--keep-forever", help="No retention limit."),
    hash_questions: bool = typer.Option(
        None, "--hash-questions/--plain-questions",
        help="Store an HMAC-SHA256 of each question instead of its text (key: CITEWISE_LOG_SALT, "
             "else a random per-knowledge-base salt)."),
    keep_embeddings: bool = typer.Option(
        None, "--keep-embeddings/--no-embeddings",
        help="Keep query embeddings (replay needs them for hashed questions; they leak meaning)."),
    as_json: bool = JSON_OPTION,
) -> None:
    """Show or change what the query log keeps.

    Show or change what the query log keeps for a knowledge base (affects new entries;
    retention applies at once)."""
    store = engine(ctx).store
    the_kb = store.get_kb(kb)
    policy = with_policy(the_kb.config.log, retention_days, hash_questions, keep_embeddings,
                         clear_retention=keep_forever)
    if policy != the_kb.config.log:
        the_kb = store.update_kb(kb, dataclasses.replace(the_kb.config, log=policy))
    purged = 0
    if policy.retention_days:
        cutoff = datetime.now(UTC) - timedelta(days=policy.retention_days)
        purged = store.purge_query_log(the_kb, iso(cutoff) or "")
    shown = {k: v for k, v in dataclasses.asdict(policy).items() if k != "salt"}
    if as_json:
        print_json({**shown, "purged": purged})
        return
    typer.echo(f"{kb}: " + ", ".join(f"{k} {v}" for k, v in shown.items())
               + (f"; {purged} old entries deleted" if purged else ""))


@app.command()
def feedback(
    ctx: typer.Context,
    query_id: int = typer.Argument(..., help="The log id of the question."),
    kb: str = KB_OPTION,
    helpful: bool = typer.Option(..., "--helpful/--unhelpful", help="Was the answer (or refusal) right?"),
    note: str = typer.Option("", help="A short note."),
    as_json: bool = JSON_OPTION,
) -> None:
    """Record whether an answer helped; feeds the hit rate and replay's comparison."""
    store = engine(ctx).store
    store.add_feedback(store.get_kb(kb), query_id, helpful, note)
    if as_json:
        print_json({"kb": kb, "query_id": query_id, "helpful": helpful, "note": note})
        return
    typer.echo(f"recorded {'helpful' if helpful else 'unhelpful'} for {kb} #{query_id}")


def _entry_dict(e: LogEntry) -> dict[str, Any]:
    return {"id": e.id, "created_at": e.created_at, "status": e.status, "path": e.path,
            "top1": e.record.get("gate", {}).get("signals", {}).get("top1"),
            "question": e.question, "feedback": e.feedback}


def _print_entry(e: LogEntry, as_json: bool) -> None:
    d = _entry_dict(e)
    if as_json:
        typer.echo(json.dumps(d, ensure_ascii=False))
        return
    top1 = "-" if d["top1"] is None else f"{d['top1']:.3f}"
    typer.echo(f"#{e.id}\t{e.created_at}\t{e.path}\t{top1}\t{e.question}")


def follow(read: Callable[[str | None], list[LogEntry]], shown: list[LogEntry],
           emit: Callable[[LogEntry], None], interval: float) -> None:
    """Poll ``read(since)`` every ``interval`` seconds and emit entries not shown yet, until
    Ctrl-C. The log's time has one-second steps, so the last second is read again and entries
    already shown in it are left out by id."""
    cursor = shown[-1].created_at if shown else None
    seen = {e.id for e in shown if e.created_at == cursor}
    try:
        while True:
            time.sleep(interval)
            new = [e for e in read(cursor) if e.id not in seen]
            for e in new:
                emit(e)
            if new and new[-1].created_at != cursor:
                cursor, seen = new[-1].created_at, set()
            seen |= {e.id for e in new if e.created_at == cursor}
    except KeyboardInterrupt:
        return


@app.command()
def tail(
    ctx: typer.Context,
    kb: str = KB_OPTION,
    n: int = typer.Option(10, "-n", min=1, help="How many entries."),
    follow_: bool = typer.Option(False, "--follow", "-f",
                                 help="Keep printing new entries as they are logged; Ctrl-C stops."),
    interval: float = typer.Option(1.0, min=0.05, help="Seconds between polls with --follow."),
    as_json: bool = typer.Option(False, "--json", help="One JSON object a line (id, created_at, "
                                 "status, path, top1, question, feedback)."),
) -> None:
    """Show the last entries of the query log, or follow new ones.

    The last entries of the log: id, time, path, top-1 cosine, question; with --follow, new
    ones as they come."""
    store = engine(ctx).store
    the_kb = store.get_kb(kb)
    shown = store.query_log(the_kb)[-n:]
    for e in shown:
        _print_entry(e, as_json)
    if follow_:
        follow(lambda since: store.query_log(the_kb, since=since), shown,
               lambda e: _print_entry(e, as_json), interval)
