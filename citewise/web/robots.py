"""robots.txt, read once per site with Python's ``urllib.robotparser``, and the polite delay.

A site's ``/robots.txt`` is fetched before its first page, with the same fetcher and limits
(``MAX_ROBOTS_BYTES``, as search engines read at most about 500 KB of it). As ``robotparser``
reads it: 401 or 403 disallows the whole site, another 4xx allows it all; a 5xx or a site that
cannot be reached disallows it (a page is not fetched while its site's rules are unknown).
The rules for ``citewise`` apply, else those for ``*``. A ``Crawl-delay`` lengthens the wait
between two requests to that site (never beyond ``MAX_CRAWL_DELAY``).
"""

from __future__ import annotations

import time
import urllib.robotparser
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from citewise.errors import DocumentError, FetchError
from citewise.web.fetch import Fetcher, Validators

AGENT = "citewise"
MAX_ROBOTS_BYTES = 512 * 1024
MAX_CRAWL_DELAY = 30.0


def origin(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


@dataclass
class _Site:
    rules: urllib.robotparser.RobotFileParser | None  # None: the site could not be asked
    why: str = ""
    delay: float = 0.0
    last: float = field(default=-1e9)


class Robots:
    """Each site's rules, read on first use, and when its next request may go."""

    def __init__(self, fetcher: Fetcher, delay: float) -> None:
        self.fetcher, self.delay = fetcher, delay
        self.sites: dict[str, _Site] = {}

    def _site(self, url: str) -> _Site:
        key = origin(url)
        if key not in self.sites:
            self.sites[key] = self._read(key)
        return self.sites[key]

    def _read(self, key: str) -> _Site:
        rules = urllib.robotparser.RobotFileParser(f"{key}/robots.txt")
        fetcher = Fetcher(self.fetcher.hosts, self.fetcher.timeout, MAX_ROBOTS_BYTES)
        site = _Site(rules)
        self.sites[key] = site  # its own request waits its turn like any other
        try:
            answer = fetcher.get(f"{key}/robots.txt", None, lambda _: Validators(),
                                 lambda _: None, self.wait)
        except FetchError as e:
            if e.status in (401, 403):
                rules.parse(["User-agent: *", "Disallow: /"])
            elif e.status is not None and 400 <= e.status < 500:
                rules.parse([])  # no rules: everything allowed
            else:
                return _Site(None, f"its site's robots.txt could not be read ({e.reason})")
            return site
        rules.parse(answer.body.decode("utf-8", errors="replace").splitlines())
        site.delay = min(float(rules.crawl_delay(AGENT) or 0), MAX_CRAWL_DELAY)
        return site

    def check(self, url: str) -> None:
        """``DocumentError`` unless robots.txt lets citewise fetch ``url``."""
        site = self._site(url)
        if site.rules is None:
            raise DocumentError(site.why)
        if not site.rules.can_fetch(AGENT, url):
            raise DocumentError("disallowed by the site's robots.txt; not fetched")

    def wait(self, url: str) -> None:
        """Sleep until the site's next request may go, and book it."""
        site = self.sites.get(origin(url))
        if site is None:
            return
        pause = max(self.delay, site.delay) - (time.monotonic() - site.last)
        if pause > 0:
            time.sleep(pause)
        site.last = time.monotonic()
