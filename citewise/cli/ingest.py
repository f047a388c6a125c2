"""``citewise ingest``: load, chunk, embed and store documents."""

from __future__ import annotations

from pathlib import Path

import typer
from tqdm import tqdm

from ..documents import LOADERS, is_beir_corpus
from .common import KB_OPTION, engine


def _count(paths: list[Path]) -> int:
    total = 0
    for p in paths:
        if is_beir_corpus(p):
            with p.open(encoding="utf-8", errors="replace") as f:
                total += sum(1 for line in f if line.strip())
        elif p.is_file():
            total += 1
        elif p.is_dir():
            total += sum(1 for f in p.rglob("*") if f.suffix.lower() in LOADERS)
    return total


def ingest(
    ctx: typer.Context,
    paths: list[Path] = typer.Argument(..., help="Files, folders or a BEIR corpus.jsonl."),
    kb: str = KB_OPTION,
    chunker: str = typer.Option(None, help="sections (default) or window."),
    embedder: str = typer.Option(
        None, help="Embedder spec for a new knowledge base [default: local:all-MiniLM-L6-v2]."
    ),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress bar."),
) -> None:
    """Add documents to a knowledge base (created if missing). Unchanged files are skipped;
    changed files replace their old chunks in one transaction; bad files are reported and
    skipped without touching anything stored."""
    eng = engine(ctx)
    the_kb = eng.open_kb(kb, embedder=embedder, chunker=chunker)
    with tqdm(total=_count(paths), unit="doc", desc=f"ingest {kb}", disable=quiet,
              leave=False) as bar:
        report = eng.ingest(the_kb, paths, progress=bar.update)
    for skip in report.skipped:
        typer.secho(f"skipped {skip.path}: {skip.reason}", fg="yellow", err=True)
    typer.echo(
        f"{kb}: {len(report.added)} added, {len(report.replaced)} replaced, "
        f"{len(report.unchanged)} unchanged, {len(report.skipped)} skipped; "
        f"{report.chunks} chunks written in {report.seconds:.1f}s"
    )


def register(app: typer.Typer) -> None:
    app.command()(ingest)
