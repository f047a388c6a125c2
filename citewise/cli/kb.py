"""``citewise kb list|show|set|backfill|delete``."""

from __future__ import annotations

import dataclasses

import typer

from citewise import kb_settings
from citewise.answer.gate import gate_for
from citewise.cli.common import JSON_OPTION, engine, print_json
from citewise.errors import ConfigError

app = typer.Typer(help="List, inspect, change, backfill and delete knowledge bases.",
                  no_args_is_help=True)


def _public(config: dict) -> dict:
    """The settings without secrets: the query log's hashing key is never printed."""
    if config.get("log", {}).get("salt"):
        config["log"]["salt"] = "(set)"
    return config


@app.command("list")
def list_(ctx: typer.Context, as_json: bool = JSON_OPTION) -> None:
    """List the knowledge bases in the store."""
    store = engine(ctx).store
    rows = [(kb, len(store.list_documents(kb)), store.count_chunks(kb)) for kb in store.list_kbs()]
    if as_json:
        print_json([{"name": kb.name, "documents": d, "chunks": c, "embedder": kb.config.embedder}
                    for kb, d, c in rows])
        return
    if not rows:
        typer.echo("No knowledge bases yet; create one with `citewise ingest --kb NAME PATH`.")
    for kb, d, c in rows:
        typer.echo(f"{kb.name}\t{d} documents\t{c} chunks\t{kb.config.embedder}")


@app.command()
def show(ctx: typer.Context, name: str = typer.Argument(..., help="Knowledge base name."),
         as_json: bool = JSON_OPTION) -> None:
    """Show a knowledge base's settings, gate and documents."""
    store = engine(ctx).store
    kb = store.get_kb(name)
    docs = store.list_documents(kb)
    gate, warnings = gate_for(kb.config)
    data = {
        "name": kb.name,
        "created_at": kb.created_at,
        "config": _public(dataclasses.asdict(kb.config)),
        "gate_in_use": {"policy": gate.policy, "threshold": gate.threshold, "warnings": warnings},
        "documents": [dataclasses.asdict(d) for d in docs],
    }
    if as_json:
        print_json(data)
        return
    c = kb.config
    typer.echo(f"{kb.name}: {len(docs)} documents, {sum(d.chunks for d in docs)} chunks")
    typer.echo(f"  embedder {c.embedder} ({c.dim} dims"
               + (f", on {c.embed_path}" if c.embed_path else "")
               + f"), chunker {c.chunker}, generator {c.generator}, "
               f"reader {c.reads}{' (auto)' if c.reader == 'auto' else ''}")
    r = c.retrieval
    fusion = f"RRF k={r.rrf_k}" if r.fusion == "rrf" else "convex"
    typer.echo(f"  retrieval dense top-{r.dense_k} + BM25 top-{r.bm25_k}, {fusion} "
               f"(dense weight {r.dense_weight}), "
               f"context {r.context_k}{f' by MMR (lambda {r.mmr_lambda})' if r.mmr else ''}")
    typer.echo(f"  gate {gate.policy} >= {gate.threshold:.3f}")
    for w in warnings:
        typer.secho(f"  warning: {w}", fg="yellow")
    for d in docs:
        typer.echo(f"  {d.doc_id}\t{d.chunks} chunks\t{d.title}")


@app.command("set")
def set_(
    ctx: typer.Context,
    name: str = typer.Argument(..., help="Knowledge base name."),
    settings: list[str] = typer.Argument(
        ..., metavar="KEY=VALUE...", show_default=False,
        help=f"Settings to change, of {', '.join(kb_settings.KEYS)}."),
    as_json: bool = JSON_OPTION,
) -> None:
    """Change a knowledge base's settings.

    Change a knowledge base's generator, gate policy, reader or retrieval settings (context_k,
    fusion, dense_weight, ...), checked as at creation; says when that makes the gate's
    calibration stale and how to calibrate again."""
    try:
        values = dict(kb_settings.parse_assignment(text) for text in settings)
    except ConfigError as e:  # a bad value is the caller's typing: a usage error (exit 2)
        raise typer.BadParameter(str(e), param_hint="KEY=VALUE") from None
    store = engine(ctx).store
    kb = store.get_kb(name)
    try:
        change = kb_settings.apply(name, kb.config, values)
    except ConfigError as e:
        raise typer.BadParameter(str(e), param_hint="KEY=VALUE") from None
    if change.changed:
        store.update_kb(name, change.config)
    gate, warnings = gate_for(change.config)
    if as_json:
        print_json({"kb": name,
                    "changed": {k: {"from": old, "to": new} for k, (old, new) in change.changed.items()},
                    "calibration": change.calibration, "notes": list(change.notes),
                    "gate_in_use": {"policy": gate.policy, "threshold": gate.threshold,
                                    "warnings": warnings}})
        return
    if not change.changed:
        typer.echo(f"{name}: nothing to change (the settings already have these values).")
    for key, (old, new) in change.changed.items():
        typer.echo(f"{name}: {key} {old} -> {new}")
    for note in change.notes:
        typer.secho(note, fg="yellow")


@app.command()
def backfill(ctx: typer.Context, name: str = typer.Argument(..., help="Knowledge base name."),
             quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress bar."),
             as_json: bool = JSON_OPTION) -> None:
    """Store sentence vectors for the chunks stored without them.

    Embed and store the sentence vectors of chunks stored without them (a knowledge base
    ingested before citewise stored them, or switched to another embedder), so that questions
    need not embed its sentences."""
    from tqdm import tqdm

    from citewise.answer.sentence_vectors import backfill as fill
    from citewise.embedders import embedder_of

    store = engine(ctx).store
    kb = store.get_kb(name)
    with tqdm(total=store.count_chunks(kb), unit="chunk", desc="sentence vectors",
              disable=quiet or as_json, leave=False) as bar:
        done = fill(store, kb, embedder_of(kb), progress=bar.update)
    if as_json:
        print_json({"kb": name, "chunks_filled": done})
        return
    typer.echo(f"{name}: sentence vectors stored for {done} chunks.")


@app.command()
def delete(ctx: typer.Context, name: str = typer.Argument(..., help="Knowledge base name."),
           yes: bool = typer.Option(False, "--yes", "-y", help="Do not ask for confirmation."),
           as_json: bool = JSON_OPTION) -> None:
    """Delete a knowledge base and everything in it."""
    store = engine(ctx).store
    kb = store.get_kb(name)
    if not yes:  # asked on stderr, so that --json output stays one object
        typer.confirm(f"Delete knowledge base {name!r} and all its documents?", abort=True,
                      err=True)
    documents, chunks = len(store.list_documents(kb)), store.count_chunks(kb)
    store.delete_kb(name)
    if as_json:
        print_json({"kb": name, "deleted": True, "documents": documents, "chunks": chunks})
        return
    typer.echo(f"Deleted {name} ({documents} documents, {chunks} chunks).")
