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

from collections.abc import Sequence
from dataclasses import dataclass

from citewise.engine import Engine, IngestReport
from citewise.ingest.documents import Skipped
from citewise.kb import KnowledgeBase
from citewise.records import Document
from citewise.web.crawl import DEFAULT_MAX_PAGES, MAX_PAGE_MB, Crawl, Progress, WebOptions
from citewise.web.pages import check_installed
from citewise.web.urls import Hosts, is_url

__all__ = ["DEFAULT_MAX_PAGES", "MAX_PAGE_MB", "Fetched", "Hosts", "Progress", "WebOptions",
           "fetch_urls", "ingest_fetched", "ingest_url", "is_url", "stored_sources"]


def stored_sources(engine: Engine, kb: KnowledgeBase) -> dict[str, str]:
    """Each stored document's ``source`` by its id: a page's URL and validators, so that a
    page fetched again is asked for conditionally."""
    return {d.doc_id: d.source for d in engine.store.list_documents(kb)}


def ingest_url(engine: Engine, kb: KnowledgeBase, urls: str | Sequence[str],
               options: WebOptions | None = None, progress: Progress | None = None) -> IngestReport:
    """Fetch ``urls`` (pages or sitemaps; with ``options.depth``, the same-site pages they
    link to) and ingest them into ``kb``, each under its URL as document id, embedding the
    pages as they arrive.

    Pages answered 304 (not modified) and pages whose text is unchanged are ``unchanged`` in
    the report; pages that cannot be fetched or read are ``skipped`` with their reasons.
    ``progress(done, expected)`` hears each page fetched."""
    check_installed()
    crawl = Crawl([urls] if isinstance(urls, str) else list(urls), options or WebOptions(),
                  stored_sources(engine, kb), progress)
    report = engine.ingest(kb, crawl.documents())
    report.unchanged.extend(crawl.not_modified)
    return report


@dataclass(frozen=True)
class Fetched:
    """A crawl's pages (or why each was skipped), and the URLs answered 304."""

    pages: list[Document | Skipped]
    not_modified: list[str]


def fetch_urls(urls: Sequence[str], options: WebOptions, stored: dict[str, str]) -> Fetched:
    """``ingest_url``'s fetching alone, every page before any is embedded: the HTTP service
    fetches in threads of their own, touching no store (``stored``: ``stored_sources``), then
    embeds in a compute slot (``ingest_fetched``), so no slot waits on the network."""
    check_installed()
    crawl = Crawl(list(urls), options, stored)
    pages = list(crawl.documents())
    return Fetched(pages, crawl.not_modified)


def ingest_fetched(engine: Engine, kb: KnowledgeBase, fetched: Fetched) -> IngestReport:
    """What ``fetch_urls`` fetched, ingested as ``ingest_url`` would."""
    report = engine.ingest(kb, fetched.pages)
    report.unchanged.extend(fetched.not_modified)
    return report
