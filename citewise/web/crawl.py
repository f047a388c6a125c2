"""The pages of a crawl, one at a time: start URLs, the sitemaps among them (and at most
``MAX_SITEMAPS`` that sitemap indexes list), and same-site links up to ``depth`` clicks away,
at most ``max_pages`` pages.

Each page becomes a ``Document`` whose id is its URL (after same-site redirects) and whose
``source`` is that URL followed by the validators the server sent (``{"etag": ...}``), so
that the next ingest asks with ``If-None-Match`` / ``If-Modified-Since``: a page answered 304
is counted unchanged without being read, and a page read again whose text is the same is
unchanged by its content hash (``Engine.ingest``). A page whose links are still to be
followed is always read whole (a 304 has no links in it). Every page that cannot be fetched
or read is a ``Skipped`` with its reason; the crawl goes on.
"""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from citewise.errors import DocumentError
from citewise.ingest.documents import Skipped, document
from citewise.ingest.loaders import parser_errors
from citewise.records import Document
from citewise.web import pages, sitemaps
from citewise.web.fetch import Fetcher, Response, Validators
from citewise.web.robots import Robots
from citewise.web.urls import Hosts, absolute, normalise, same_site

MAX_SITEMAPS = 50  # entries of sitemap indexes read in one crawl (the start URLs aside)
DEFAULT_MAX_PAGES = 100
MAX_PAGE_MB = 5.0
# links to these are not pages: not fetched, not counted, not reported
NOT_PAGES = frozenset(
    ".png .jpg .jpeg .gif .svg .webp .ico .bmp .tif .tiff .css .js .mjs .json .woff .woff2 .ttf "
    ".otf .eot .zip .gz .tgz .bz2 .xz .7z .rar .tar .mp3 .mp4 .m4a .wav .ogg .webm .avi .mov "
    ".exe .dmg .iso .apk .rss .atom".split()
)

Progress = Callable[[int, int], None]  # (pages done, pages expected so far)


@dataclass(frozen=True)
class WebOptions:
    """How far and how fast to crawl, and within which limits."""

    depth: int = 0  # clicks from a start page: 0 reads only the pages named
    max_pages: int = DEFAULT_MAX_PAGES
    delay: float = 0.5  # seconds between two requests to one site (or its Crawl-delay)
    timeout: float = 60.0  # seconds for one answer in all: connect, headers and body
    max_page_bytes: int = int(MAX_PAGE_MB * 1024 * 1024)
    hosts: Hosts = field(default_factory=Hosts.any)


def source_of(url: str, validators: Validators) -> str:
    """A web document's ``source``: its URL, then its validators as JSON when it has any."""
    meta = {k: v for k, v in (("etag", validators.etag),
                              ("last_modified", validators.last_modified)) if v}
    return f"{url} {json.dumps(meta, separators=(',', ':'))}" if meta else url


def validators_of(source: str) -> Validators:
    """The validators ``source_of`` wrote (none if ``source`` holds none or is not a URL's)."""
    _, _, meta = source.partition(" ")
    try:
        found = json.loads(meta) if meta else {}
    except json.JSONDecodeError:
        return Validators()
    if not isinstance(found, dict):
        return Validators()
    return Validators(str(found.get("etag", "")), str(found.get("last_modified", "")))


def _is_page_link(url: str) -> bool:
    path = urlsplit(url).path.lower()
    dot = path.rfind(".")
    return dot <= path.rfind("/") or path[dot:] not in NOT_PAGES


@dataclass(frozen=True)
class _Item:
    url: str
    depth: int
    start: str  # the start URL it was found from: its site is the crawl's
    kind: str  # "start" (a page or a sitemap), "page", or "sitemap" (a sitemap index's entry)

    @property
    def types(self) -> frozenset[str]:
        if self.kind == "page":
            return pages.PAGE_TYPES
        return pages.SITEMAP_TYPES | (pages.PAGE_TYPES if self.kind == "start" else frozenset())


class Crawl:
    """One crawl's pages as documents (``documents()``), and the URLs answered 304."""

    def __init__(self, urls: list[str], options: WebOptions, stored: dict[str, str],
                 progress: Progress | None = None) -> None:
        self.options, self.stored, self.progress = options, stored, progress
        self.fetcher = Fetcher(options.hosts, options.timeout, options.max_page_bytes)
        self.robots = Robots(self.fetcher, options.delay)
        self.urls = urls
        self.not_modified: list[str] = []
        self.queue: deque[_Item] = deque()
        self.seen: set[str] = set()
        self.read: set[str] = set()
        self.pages = self.queued = self.sitemaps = 0

    def _known(self, conditional: bool) -> Callable[[str], Validators | None]:
        def known(url: str) -> Validators | None:
            source = self.stored.get(url)
            return validators_of(source) if conditional and source is not None else None
        return known

    def _add(self, url: str, depth: int, start: str, kind: str = "page") -> None:
        """Queue ``url`` unless it was seen, or the crawl has as many pages (or sitemaps) as
        it may fetch queued already."""
        full = (self.sitemaps >= MAX_SITEMAPS if kind == "sitemap"
                else kind == "page" and self.queued >= self.options.max_pages)
        if url in self.seen or full:
            return
        self.seen.add(url)
        self.queued += kind != "sitemap"
        self.sitemaps += kind == "sitemap"
        self.queue.append(_Item(url, depth, start, kind))

    def documents(self) -> Iterator[Document | Skipped]:
        for given in self.urls:
            try:
                url = normalise(given)
            except DocumentError as e:
                yield Skipped(given, e.reason)
                continue
            self._add(url, 0, url, "start")
        while self.queue and self.pages < self.options.max_pages:
            item = self.queue.popleft()
            if item.url in self.read:
                continue
            result = self._visit(item)
            if result is not None:
                yield result
            if self.progress:
                self.progress(self.pages, min(self.options.max_pages, max(self.queued, self.pages)))

    def _visit(self, item: _Item) -> Document | Skipped | None:
        conditional = item.depth >= self.options.depth  # its links are not needed
        self.pages += item.kind != "sitemap"  # a start URL that is a sitemap is given back
        try:
            answer = self.fetcher.get(item.url, item.types, self._known(conditional),
                                      self.robots.check, self.robots.wait)
            if answer.media_type in pages.SITEMAP_TYPES:
                self.pages -= item.kind == "start"
                self._sitemap(item, answer)
                return None
            if answer.url in self.read:  # a redirect to a page read already
                return None
            self.read.add(answer.url)
            if answer.status == 304:
                self.not_modified.append(answer.url)
                return None
            return self._page(item, answer)
        except DocumentError as e:
            return Skipped(item.url, e.reason)
        except parser_errors() as e:
            return Skipped(item.url, f"not readable ({type(e).__name__})")

    def _sitemap(self, item: _Item, answer: Response) -> None:
        found = sitemaps.parse(answer.body, self.options.max_page_bytes)
        for loc in found.urls:
            url = absolute(loc, answer.url)
            if url and same_site(item.start, url):
                self._add(url, item.depth, item.start, "sitemap" if found.index else "page")

    def _page(self, item: _Item, answer: Response) -> Document:
        page = pages.read(answer)
        if item.depth < self.options.depth:
            for href in page.links:
                url = absolute(href, answer.url)
                if url and same_site(item.start, url) and _is_page_link(url):
                    self._add(url, item.depth + 1, item.start)
        if not page.index:
            raise DocumentError("the page asks not to be indexed (<meta name=\"robots\" noindex>)")
        return document(answer.url, page.title, page.sections,
                        source_of(answer.url, answer.validators))
