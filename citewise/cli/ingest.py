"""``citewise ingest``: load, chunk, embed and store documents."""

from __future__ import annotations

from pathlib import Path

import typer
from tqdm import tqdm

from ..chunking import CHUNKERS, DEFAULT_CHUNKER
from ..documents import LOADERS, is_beir_corpus
from ..errors import ConfigError
from .common import KB_OPTION, engine, one_of


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


def _check_address(value: str | None) -> str | None:
    if value is None or value in ("local", "auto") or ":" in value:
        return value
    raise ConfigError(
        f"{value!r} is not a Ray address (local, auto, HOST:PORT or ray://HOST:PORT); give "
        "--ray after the paths and other options, or write --ray=ADDRESS"
    )


def ingest(
    ctx: typer.Context,
    paths: list[Path] = typer.Argument(..., help="Files, folders or a BEIR corpus.jsonl."),
    kb: str = KB_OPTION,
    chunker: str = typer.Option(
        None, help=f"Chunker for a new knowledge base: {one_of(CHUNKERS, DEFAULT_CHUNKER)}."),
    embedder: str = typer.Option(
        None, help="Embedder spec for a new knowledge base [default: local:all-MiniLM-L6-v2]."
    ),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress bar."),
    ray: str = typer.Option(
        None, "--ray", metavar="[ADDRESS]", callback=lambda value: _check_address(value),
        help="Read, chunk and embed in parallel on a Ray cluster (pip install "
        "'citewise\\[ray]'): ADDRESS of a running cluster (auto, HOST:PORT, ray://HOST:PORT), "
        "or alone (or 'local') for a local instance. Give it last, or as --ray=ADDRESS.",
    ),
    ray_workers: int = typer.Option(
        None, "--ray-workers", min=1,
        help="Parallel ingest tasks [default: the local instance's or cluster's CPUs].",
    ),
) -> None:
    """Add documents to a knowledge base (created if missing). Unchanged files are skipped;
    changed files replace their old chunks in one transaction; bad files are reported and
    skipped without touching anything stored. With --ray, the work runs on a Ray cluster and an
    interrupted run resumes where it stopped when started again."""
    eng = engine(ctx)
    the_kb = eng.open_kb(kb, embedder=embedder, chunker=chunker)
    with tqdm(total=_count(paths), unit="doc", desc=f"ingest {kb}", disable=quiet,
              leave=False) as bar:
        if ray:
            from .. import distributed

            report = distributed.ingest(eng.store.url, kb, paths, ray, ray_workers, bar.update)
        else:
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
