"""``citewise ingest``: load, chunk, embed and store documents."""

from __future__ import annotations

from pathlib import Path

import typer
from tqdm import tqdm

from ..chunking import CHUNKERS, DEFAULT_CHUNKER
from ..documents import LOADERS, is_beir_corpus
from ..engine import Engine, IngestReport
from ..errors import ConfigError
from ..kb import KnowledgeBase
from ..web.crawl import DEFAULT_MAX_PAGES, MAX_PAGE_MB, WebOptions
from ..web.pages import check_installed
from ..web.urls import is_url
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


def _web(eng: Engine, the_kb: KnowledgeBase, urls: list[str], options: WebOptions,
         quiet: bool) -> IngestReport:
    from ..web import ingest_url

    with tqdm(total=len(urls), unit="page", desc="fetch", disable=quiet, leave=False) as bar:
        def progress(done: int, expected: int) -> None:
            bar.total = expected
            bar.update(done - bar.n)

        return ingest_url(eng, the_kb, urls, options, progress)


def _merge(first: IngestReport, second: IngestReport) -> IngestReport:
    for name in ("added", "replaced", "unchanged", "skipped"):
        getattr(first, name).extend(getattr(second, name))
    first.chunks += second.chunks
    first.seconds += second.seconds
    return first


def ingest(
    ctx: typer.Context,
    paths: list[str] = typer.Argument(
        ..., help="Files, folders, a BEIR corpus.jsonl, or http(s) URLs of pages or sitemaps."),
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
) -> None:
    """Add documents to a knowledge base (created if missing). Unchanged files are skipped;
    changed files replace their old chunks in one transaction; bad files are reported and
    skipped without touching anything stored. With --ray, the work runs on a Ray cluster and an
    interrupted run resumes where it stopped when started again. An http(s) URL is fetched
    (pip install 'citewise\\[web]'): a page, a sitemap, or with --depth the same-site pages it
    links to, each stored under its URL; robots.txt is honoured, and a page the server says is
    not modified, or whose text is the same, is left as it is."""
    urls = [p for p in paths if is_url(p)]
    files = [Path(p) for p in paths if not is_url(p)]
    if urls and ray:
        raise ConfigError("--ray reads files only; ingest URLs in a run of their own")
    if urls:
        check_installed()
    eng = engine(ctx)
    the_kb = eng.open_kb(kb, embedder=embedder, chunker=chunker)
    report = IngestReport()
    if files:
        with tqdm(total=_count(files), unit="doc", desc=f"ingest {kb}", disable=quiet,
                  leave=False) as bar:
            if ray:
                from .. import distributed

                report = distributed.ingest(eng.store.url, kb, files, ray, ray_workers, bar.update)
            else:
                report = eng.ingest(the_kb, files, progress=bar.update)
    if urls:
        options = WebOptions(depth=depth, max_pages=max_pages, delay=delay,
                             max_page_bytes=int(max_page_mb * 1024 * 1024))
        report = _merge(report, _web(eng, the_kb, urls, options, quiet))
    for skip in report.skipped:
        typer.secho(f"skipped {skip.path}: {skip.reason}", fg="yellow", err=True)
    typer.echo(
        f"{kb}: {len(report.added)} added, {len(report.replaced)} replaced, "
        f"{len(report.unchanged)} unchanged, {len(report.skipped)} skipped; "
        f"{report.chunks} chunks written in {report.seconds:.1f}s"
    )


def register(app: typer.Typer) -> None:
    app.command()(ingest)
