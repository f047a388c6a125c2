"""Ingest from the web: pages, sitemaps and same-site crawls, into a knowledge base.

    from citewise.web import WebOptions, ingest_url

    report = ingest_url(engine, kb, ["https://example.com/docs/"], WebOptions(depth=1))

Nothing here reaches the network unless a caller names a URL. The parts:

    urls.py      URLs as document ids, same-site rules, the hosts and addresses allowed
    fetch.py     one GET within limits: timeouts, size cap, types, same-site redirects, 304s
    deadline.py  the thread that cuts off a fetch past its deadline, however slow the server
    robots.py    robots.txt per site (urllib.robotparser) and the polite delay
    sitemaps.py  <urlset> and <sitemapindex>, gzip or not, parsed without entities
    pages.py     a page's main text with headings (trafilatura), its title and links
    crawl.py     the queue: start URLs, sitemaps, links to ``depth``, ``max_pages``

Reading HTML needs the ``web`` extra (``pip install 'citewise[web]'``: trafilatura).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager

from ..engine import Engine, IngestReport
from ..kb import KnowledgeBase
from .crawl import DEFAULT_MAX_PAGES, MAX_PAGE_MB, Crawl, Progress, WebOptions
from .pages import check_installed
from .urls import Hosts, is_url

__all__ = ["DEFAULT_MAX_PAGES", "MAX_PAGE_MB", "Hosts", "Progress", "WebOptions", "ingest_url",
           "is_url"]


def ingest_url(engine: Engine, kb: KnowledgeBase, urls: str | Sequence[str],
               options: WebOptions | None = None, progress: Progress | None = None,
               hold: Callable[[], AbstractContextManager[object]] | None = None) -> IngestReport:
    """Fetch ``urls`` (pages or sitemaps; with ``options.depth``, the same-site pages they
    link to) and ingest them into ``kb``, each under its URL as document id.

    Pages answered 304 (not modified) and pages whose text is unchanged are ``unchanged`` in
    the report; pages that cannot be fetched or read are ``skipped`` with their reasons.
    ``progress(done, expected)`` hears each page fetched. Pages are embedded as they arrive;
    with ``hold`` (the HTTP service's compute slot), every page is fetched first and then
    embedded inside ``hold()``, so that no slot waits on the network."""
    check_installed()
    stored = {d.doc_id: d.source for d in engine.store.list_documents(kb)}
    crawl = Crawl([urls] if isinstance(urls, str) else list(urls), options or WebOptions(),
                  stored, progress)
    if hold is None:
        report = engine.ingest(kb, crawl.documents())
    else:
        fetched = list(crawl.documents())
        with hold():
            report = engine.ingest(kb, fetched)
    report.unchanged.extend(crawl.not_modified)
    return report
