"""``citewise ingest``: load, chunk, embed and store documents.

``--json`` prints one object (keys are only added within a major version)::

    {"kb": str, "created": bool, "added": [doc_id], "replaced": [doc_id],
     "unchanged": [doc_id], "skipped": [{"path", "reason"}], "chunks": int, "seconds": float}
"""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path

import typer
from tqdm import tqdm

from citewise import kb_settings
from citewise.cli.common import JSON_OPTION, KB_OPTION, engine, file_config, one_of, print_json, store_url
from citewise.config import KB_CREATION_KEYS, FileConfig
from citewise.embedders import REGISTRY as EMBEDDERS
from citewise.engine import Engine, IngestReport
from citewise.errors import ConfigError, KnowledgeBaseError
from citewise.ingest.chunking import CHUNKERS, DEFAULT_CHUNKER
from citewise.ingest.documents import LOADERS, is_beir_corpus
from citewise.kb import KnowledgeBase
from citewise.web.crawl import DEFAULT_MAX_PAGES, MAX_PAGE_MB, WebOptions
from citewise.web.pages import check_installed
from citewise.web.urls import is_url


def _web(eng: Engine, kb: KnowledgeBase, urls: list[str], options: WebOptions,
         quiet: bool) -> IngestReport:
    """Fetch ``urls`` and ingest what they hold (``citewise.web``), a progress bar counting
    pages. Only a URL the user named on the command line reaches this function, and nothing
    else in the CLI opens a connection."""
    from citewise.web import ingest_url

    with tqdm(total=len(urls), unit="page", desc="fetch", disable=quiet, leave=False) as bar:
        def progress(done: int, expected: int) -> None:
            bar.total = expected
            bar.update(done - bar.n)

        return ingest_url(eng, kb, urls, options, progress)


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
                        a.skipped + b.skipped, a.chunks + b.chunks, a.seconds + b.seconds,
                        b.embed_path or a.embed_path)


def ingest(
    ctx: typer.Context,
    paths: list[str] = typer.Argument(
        ..., help="Files, folders, a BEIR corpus.jsonl, or http(s):// URLs.", show_default=False),
    kb: str = KB_OPTION,
    chunker: str = typer.Option(
        None, help=f"Chunker for a new knowledge base: {one_of(CHUNKERS, DEFAULT_CHUNKER)} "
        "[default: citewise.toml's [kb] chunker]."),
    embedder: str = typer.Option(
        None, help=f"Embedder spec for a new knowledge base, NAME:ARGUMENT, one of "
        f"{', '.join(EMBEDDERS)} [default: citewise.toml's [kb] embedder, else "
        "local:all-MiniLM-L6-v2]."
    ),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress bar."),
    ray: str = typer.Option(
        None, "--ray", metavar="[ADDRESS]", callback=lambda value: _check_address(value),
        help="Read, chunk and embed in parallel on a Ray cluster (pip install "
        "'citewise[ray]'): ADDRESS of a running cluster (auto, HOST:PORT, ray://HOST:PORT), "
        "or alone (or 'local') for a local instance. Give it last, or as --ray=ADDRESS.",
    ),
    ray_workers: int = typer.Option(
        None, "--ray-workers", min=1,
        help="Parallel ingest tasks [default: the local instance's or cluster's CPUs].",
    ),
    depth: int = typer.Option(
        0, "--depth", min=0, help="URLs: follow same-site links this many clicks from each page "
        "named (0: only the pages named, or a sitemap's pages)."),
    max_pages: int = typer.Option(
        DEFAULT_MAX_PAGES, "--max-pages", min=1, help="URLs: fetch at most this many pages."),
    delay: float = typer.Option(
        0.5, "--delay", min=0.0, help="URLs: seconds between two requests to one site (a longer "
        "Crawl-delay in its robots.txt wins)."),
    max_page_mb: float = typer.Option(
        MAX_PAGE_MB, "--max-page-mb", min=0.01, help="URLs: refuse a page over this size."),
    as_json: bool = JSON_OPTION,
) -> None:
    """Add files, folders, a BEIR corpus or web pages to a knowledge base.

    Add documents to a knowledge base (created if missing). Unchanged files are skipped;
    changed files replace their old chunks in one transaction; bad files are reported and
    skipped without touching anything stored. A path that does not exist is a usage error and
    nothing is created. With --ray, the work runs on a Ray cluster and an interrupted run
    resumes where it stopped when started again. An http(s) URL is fetched (pip install
    'citewise\\[web]'): a page, a sitemap, or with --depth the same-site pages it links to, each
    stored under its URL; robots.txt is honoured, and a page the server says is not modified,
    or whose text is the same, is left as it is."""
    urls, files = _sources(paths)
    if urls:
        check_installed()  # before anything is created
    eng = engine(ctx)
    the_kb, created = _open(eng, kb, embedder, chunker, file_config(ctx))
    report = IngestReport()
    if urls:
        options = WebOptions(depth=depth, max_pages=max_pages, delay=delay,
                             max_page_bytes=int(max_page_mb * 1024 * 1024))
        report = _web(eng, the_kb, urls, options, quiet or as_json)
    with tqdm(total=_count(files), unit="doc", desc=f"ingest {kb}", disable=quiet or as_json,
              leave=False) as bar:
        if files and ray:
            from citewise.ingest import distributed

            report = _merged(report, distributed.ingest(store_url(ctx), kb, files, ray,
                                                        ray_workers, bar.update))
        elif files:
            report = _merged(report, eng.ingest(the_kb, files, progress=bar.update))
    if as_json:
        print_json({"kb": kb, "created": created, "added": report.added,
                    "replaced": report.replaced, "unchanged": report.unchanged,
                    "skipped": [asdict(s) for s in report.skipped], "chunks": report.chunks,
                    "seconds": round(report.seconds, 3), "embed_path": report.embed_path or None})
        return
    for skip in report.skipped:
        typer.secho(f"skipped {skip.path}: {skip.reason}", fg="yellow", err=True)
    typer.echo(
        f"{kb}: {len(report.added)} added, {len(report.replaced)} replaced, "
        f"{len(report.unchanged)} unchanged, {len(report.skipped)} skipped; "
        f"{report.chunks} chunks written in {report.seconds:.1f}s"
        + (f", embedded on {report.embed_path}" if report.embed_path else "")
    )


def register(app: typer.Typer) -> None:
    app.command()(ingest)
