"""``citewise ingest``: load, chunk, embed and store documents.

``--json`` prints one object (keys are only added within a major version)::

    {"kb": str, "created": bool, "added": [doc_id], "replaced": [doc_id],
     "unchanged": [doc_id], "skipped": [{"path", "reason"}], "chunks": int, "seconds": float}
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path

import typer
from tqdm import tqdm

from .. import kb_settings
from ..chunking import CHUNKERS, DEFAULT_CHUNKER
from ..config import KB_CREATION_KEYS, FileConfig
from ..documents import LOADERS, is_beir_corpus
from ..engine import Engine, IngestReport
from ..errors import ConfigError, KnowledgeBaseError
from ..kb import KnowledgeBase
from .common import JSON_OPTION, KB_OPTION, engine, file_config, one_of, print_json

URL_SCHEMES = ("http://", "https://")


def is_url(source: str) -> bool:
    return source.lower().startswith(URL_SCHEMES)


def ingest_url(eng: Engine, kb: KnowledgeBase, urls: list[str],
               progress: Callable[[int], None] | None = None) -> IngestReport:
    """Fetch ``urls`` and ingest what they hold: the one seam of web ingest.

    Only a URL the user named on the command line reaches this function, and nothing else in
    the CLI opens a connection."""
    raise ConfigError(
        f"web ingest is not available in this version of citewise ({urls[0]}); save the pages "
        "and ingest the files"
    )


def _sources(sources: list[str]) -> tuple[list[str], list[Path]]:
    """URLs kept as given, and paths, each of which must exist (else a usage error)."""
    urls = [s for s in sources if is_url(s)]
    paths = [Path(s) for s in sources if not is_url(s)]
    for p in paths:
        if not p.exists():
            raise typer.BadParameter(f"{p} does not exist; nothing was ingested",
                                     param_hint="'PATHS...'")
    return urls, paths


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


def _open(eng: Engine, name: str, embedder: str | None, chunker: str | None,
          config: FileConfig) -> tuple[KnowledgeBase, bool]:
    """The knowledge base, and whether it was made now (with citewise.toml's [kb] defaults)."""
    try:
        eng.store.get_kb(name)
    except KnowledgeBaseError:
        pass
    else:
        return eng.open_kb(name, embedder=embedder, chunker=chunker), False
    from_file = [k for k, v in (("embedder", embedder), ("chunker", chunker))
                 if v is None and k in config.kb]
    try:
        kb = eng.create_kb(name, embedder or config.kb.get("embedder"),
                           chunker or config.kb.get("chunker"))
    except ConfigError as e:
        if not from_file:
            raise
        raise ConfigError(f"{e} (from {', '.join(config.where('kb', k) for k in from_file)})") from None
    settings = {k: v for k, v in config.kb.items() if k not in KB_CREATION_KEYS}
    if settings:
        change = kb_settings.apply(name, kb.config, settings)
        kb = eng.store.update_kb(name, change.config)
    return kb, True


def _merged(a: IngestReport, b: IngestReport) -> IngestReport:
    return IngestReport(a.added + b.added, a.replaced + b.replaced, a.unchanged + b.unchanged,
                        a.skipped + b.skipped, a.chunks + b.chunks, a.seconds + b.seconds)


def ingest(
    ctx: typer.Context,
    paths: list[str] = typer.Argument(
        ..., help="Files, folders, a BEIR corpus.jsonl, or http(s):// URLs.", show_default=False),
    kb: str = KB_OPTION,
    chunker: str = typer.Option(
        None, help=f"Chunker for a new knowledge base: {one_of(CHUNKERS, DEFAULT_CHUNKER)} "
        "[default: citewise.toml's [kb] chunker]."),
    embedder: str = typer.Option(
        None, help="Embedder spec for a new knowledge base [default: citewise.toml's [kb] "
        "embedder, else local:all-MiniLM-L6-v2]."
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
    as_json: bool = JSON_OPTION,
) -> None:
    """Add documents to a knowledge base (created if missing). Unchanged files are skipped;
    changed files replace their old chunks in one transaction; bad files are reported and
    skipped without touching anything stored. A path that does not exist is a usage error and
    nothing is created. With --ray, the work runs on a Ray cluster and an interrupted run
    resumes where it stopped when started again."""
    urls, files = _sources(paths)
    eng = engine(ctx)
    the_kb, created = _open(eng, kb, embedder, chunker, file_config(ctx))
    report = IngestReport()
    with tqdm(total=_count(files), unit="doc", desc=f"ingest {kb}", disable=quiet or as_json,
              leave=False) as bar:
        if urls:
            report = ingest_url(eng, the_kb, urls, progress=bar.update)
        if files and ray:
            from .. import distributed

            report = _merged(report, distributed.ingest(eng.store.url, kb, files, ray,
                                                        ray_workers, bar.update))
        elif files:
            report = _merged(report, eng.ingest(the_kb, files, progress=bar.update))
    if as_json:
        print_json({"kb": kb, "created": created, "added": report.added,
                    "replaced": report.replaced, "unchanged": report.unchanged,
                    "skipped": [asdict(s) for s in report.skipped], "chunks": report.chunks,
                    "seconds": round(report.seconds, 3)})
        return
    for skip in report.skipped:
        typer.secho(f"skipped {skip.path}: {skip.reason}", fg="yellow", err=True)
    typer.echo(
        f"{kb}: {len(report.added)} added, {len(report.replaced)} replaced, "
        f"{len(report.unchanged)} unchanged, {len(report.skipped)} skipped; "
        f"{report.chunks} chunks written in {report.seconds:.1f}s"
    )


def register(app: typer.Typer) -> None:
    app.command()(ingest)
