"""Ingest from the web, against sites served on 127.0.0.1 by ``http.server`` (``web_site.py``):
robots.txt, sitemaps (plain, gzip, indexes), same-site crawls to a depth, conditional
re-fetching (a changed page replaced, an unchanged one answered 304 and left), and the limits
(size, type, redirects off the site, noindex, nofollow)."""

from __future__ import annotations

import gzip
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from citewise.cli import app
from citewise.engine import Engine
from citewise.errors import ConfigError
from citewise.web import WebOptions, ingest_url
from citewise.web.crawl import source_of, validators_of
from citewise.web.fetch import Validators
from citewise.web.urls import normalise
from tests.web_site import Route, Site, web_site

pytestmark = pytest.mark.heavy  # servers, processes, deadlines or megabytes: make test, not make unit

FAST = WebOptions(delay=0, timeout=5)
ROBOTS = "User-agent: *\nDisallow: /private/\n"


def article(title: str, *sections: tuple[str, str], links: str = "") -> str:
    body = "".join(f"<h2>{h}</h2><p>{p}</p>" for h, p in sections)
    return (f"<html><head><title>{title}</title></head><body><nav>Home | About | Contact"
            f"{links}</nav><main><article><h1>{title}</h1>{body}</article></main>"
            "<footer>Copyright 2024 The Quit Line. All rights reserved.</footer></body></html>")


WITHDRAWAL = article(
    "Withdrawal",
    ("How long it lasts", "Nicotine withdrawal symptoms peak in the first three days and fade "
     "over two to four weeks for most people who stop smoking."),
    ("Coping with cravings", "A craving passes in a few minutes; delay, drink water and keep "
     "your hands busy until it fades away again."),
)
GUM = article("Nicotine gum", ("Dosing", "Chew one piece of 2 mg gum every one to two hours "
                                "during the first six weeks, then taper slowly."))


def sitemap(site: Site, *paths: str, index: bool = False) -> bytes:
    tag, item = ("sitemapindex", "sitemap") if index else ("urlset", "url")
    locs = "".join(f"<{item}><loc>{site.base}{p}</loc></{item}>" for p in paths)
    return (f'<?xml version="1.0" encoding="UTF-8"?><{tag} xmlns="http://www.sitemaps.org/'
            f'schemas/sitemap/0.9">{locs}</{tag}>').encode()


def kb_of(engine: Engine):
    return engine.open_kb("web", embedder="hashing:256")


def sections(engine: Engine, kb, doc_id: str) -> set[tuple[str, ...]]:
    keys = list(range(1, 10_000))
    return {c.section for c in engine.store.chunks(kb, keys).values() if c.doc_id == doc_id}


def test_a_sitemap_is_read_robots_txt_honoured_and_headings_kept(engine: Engine) -> None:
    kb = kb_of(engine)
    with web_site() as site:
        site.page("/robots.txt", ROBOTS, type="text/plain")
        site.page("/withdrawal.html", WITHDRAWAL)
        site.page("/gum.html", GUM)
        site.page("/private/notes.html", article("Private", ("Secret", "not for crawlers " * 20)))
        site.routes["/sitemap.xml"] = Route(
            sitemap(site, "/withdrawal.html", "/gum.html", "/private/notes.html"),
            type="application/xml")
        report = ingest_url(engine, kb, f"{site.base}/sitemap.xml", FAST)

        assert sorted(report.added) == [f"{site.base}/gum.html", f"{site.base}/withdrawal.html"]
        [skip] = report.skipped
        assert skip.path == f"{site.base}/private/notes.html" and "robots.txt" in skip.reason
        assert "/private/notes.html" not in site.paths()
        assert site.paths()[0] == "/robots.txt" and site.paths().count("/robots.txt") == 1
        assert all(h["user-agent"].startswith("citewise") for _, h in site.log)
    doc = f"{site.base}/withdrawal.html"
    assert sections(engine, kb, doc) == {("How long it lasts",), ("Coping with cravings",)}
    [info] = [d for d in engine.store.list_documents(kb) if d.doc_id == doc]
    assert info.title == "Withdrawal"
    text = " ".join(c.text for c in engine.store.chunks(kb, list(range(1, 100))).values())
    assert "Copyright" not in text and "Contact" not in text  # boilerplate left out


def test_a_changed_page_is_replaced_and_an_unchanged_one_answered_304(engine: Engine) -> None:
    kb = kb_of(engine)
    with web_site() as site:
        site.page("/withdrawal.html", WITHDRAWAL)
        site.page("/gum.html", GUM)
        site.page("/plain.html", GUM.replace("Nicotine gum", "No validators"), etag=False)
        urls = [f"{site.base}/{p}" for p in ("withdrawal.html", "gum.html", "plain.html")]
        first = ingest_url(engine, kb, urls, FAST)
        assert len(first.added) == 3 and not first.skipped

        site.page("/gum.html", GUM.replace("2 mg", "4 mg"))
        site.log.clear()
        second = ingest_url(engine, kb, urls, FAST)

    assert second.replaced == [urls[1]] and not second.added and not second.skipped
    assert sorted(second.unchanged) == sorted([urls[0], urls[2]])
    # the unchanged page was asked for conditionally and answered 304: not read again
    [asked] = site.requests("/withdrawal.html")
    assert asked["if-none-match"].startswith('"')
    # the page without validators was read again and found unchanged by its content hash
    assert "if-none-match" not in site.requests("/plain.html")[0]
    found = engine.retrieve(kb, "how much gum dose")
    assert any("4 mg" in c.chunk.text for c in found.context)


def test_a_crawl_follows_same_site_links_to_its_depth_and_max_pages(engine: Engine) -> None:
    kb = kb_of(engine)
    with web_site() as site, web_site() as elsewhere:
        elsewhere.page("/x.html", GUM)
        links = ('<a href="/withdrawal.html">w</a><a href="gum.html#top">g</a>'
                 f'<a href="{elsewhere.base}/x.html">other site</a><a href="/logo.png">logo</a>'
                 '<a href="/nofollow.html" rel="nofollow">n</a><a href="mailto:a@b.c">m</a>')
        site.page("/", article("Home", ("Welcome", "A guide to stopping smoking for good, "
                                                   "with help for every week of it."), links=links))
        site.page("/withdrawal.html", WITHDRAWAL.replace("</nav>", '<a href="/deep.html">d</a></nav>'))
        site.page("/gum.html", GUM)
        site.page("/deep.html", GUM)
        report = ingest_url(engine, kb, site.base, WebOptions(delay=0, timeout=5, depth=1))
        assert sorted(report.added) == sorted(f"{site.base}{p}" for p in
                                              ("/", "/withdrawal.html", "/gum.html"))
        assert not elsewhere.log and "/deep.html" not in site.paths()
        assert "/logo.png" not in site.paths() and "/nofollow.html" not in site.paths()

        capped = ingest_url(engine, kb_of(engine), site.base,
                            WebOptions(delay=0, timeout=5, depth=2, max_pages=2))
        assert len(capped.added) + len(capped.unchanged) + len(capped.replaced) == 2


def test_redirects_are_followed_on_the_site_only(engine: Engine) -> None:
    kb = kb_of(engine)
    with web_site() as site, web_site() as elsewhere:
        elsewhere.page("/landing.html", GUM)
        site.page("/withdrawal.html", WITHDRAWAL)
        site.routes["/old.html"] = Route(status=301, headers={"Location": "/withdrawal.html"})
        site.routes["/away.html"] = Route(
            status=302, headers={"Location": f"{elsewhere.base}/landing.html"})
        report = ingest_url(engine, kb, [f"{site.base}/old.html", f"{site.base}/away.html"], FAST)

    assert report.added == [f"{site.base}/withdrawal.html"]  # the page's own URL is its id
    [skip] = report.skipped
    assert skip.path == f"{site.base}/away.html" and "another site" in skip.reason
    assert not elsewhere.log


@pytest.mark.parametrize("length", [True, False], ids=["content-length", "no-length"])
def test_an_oversized_page_is_refused_and_nothing_stored(engine: Engine, length: bool) -> None:
    kb = kb_of(engine)
    big = WITHDRAWAL.replace("<main>", "<main>" + "<p>filler text</p>" * 150_000)
    with web_site() as site:
        site.routes["/big.html"] = Route(big.encode(), length=length)
        site.routes["/bomb.html"] = Route(gzip.compress(b" " * 30_000_000),
                                          headers={"Content-Encoding": "gzip"})
        report = ingest_url(engine, kb, [f"{site.base}/big.html", f"{site.base}/bomb.html"],
                            WebOptions(delay=0, timeout=5, max_page_bytes=1024 * 1024))
    assert not report.added and len(report.skipped) == 2
    assert all("page limit" in s.reason for s in report.skipped)
    assert engine.store.list_documents(kb) == []


def test_types_statuses_noindex_and_other_formats(engine: Engine) -> None:
    kb = kb_of(engine)
    with web_site() as site:
        site.routes["/logo.png"] = Route(b"\x89PNG....", type="image/png")
        site.routes["/gone.html"] = Route(b"gone", status=410)
        site.page("/hidden.html", WITHDRAWAL.replace(
            "<head>", '<head><meta name="robots" content="noindex">'))
        site.routes["/notes.md"] = Route(b"# Notes\n\n## Patches\n\nA patch lasts 24 hours.\n",
                                         type="text/markdown")
        site.routes["/latin.txt"] = Route("Caf\u00e9 au lait.".encode("latin-1"),
                                          type="text/plain; charset=iso-8859-1")
        site.routes["/data.xml"] = Route(b"<rss><channel/></rss>", type="application/xml")
        names = ["logo.png", "gone.html", "hidden.html", "notes.md", "latin.txt", "data.xml"]
        report = ingest_url(engine, kb, [f"{site.base}/{n}" for n in names] + ["ftp://x/y"], FAST)
    reasons = {Path(s.path).name: s.reason for s in report.skipped}
    assert "image/png" in reasons["logo.png"]
    assert reasons["gone.html"].startswith("HTTP 410")
    assert "noindex" in reasons["hidden.html"]
    assert "not a sitemap" in reasons["data.xml"]
    assert "not an http(s) URL" in reasons["y"]
    assert sorted(report.added) == [f"{site.base}/latin.txt", f"{site.base}/notes.md"]
    assert sections(engine, kb, f"{site.base}/notes.md") == {("Patches",)}
    text = [c.text for c in engine.store.chunks(kb, list(range(1, 100))).values()]
    assert "Caf\u00e9 au lait." in text


def test_a_sitemap_index_and_a_gzip_sitemap(engine: Engine) -> None:
    kb = kb_of(engine)
    with web_site() as site:
        site.page("/withdrawal.html", WITHDRAWAL)
        site.page("/gum.html", GUM)
        site.routes["/a.xml"] = Route(sitemap(site, "/withdrawal.html"), type="text/xml")
        site.routes["/b.xml.gz"] = Route(gzip.compress(sitemap(site, "/gum.html", "/gum.html")),
                                         type="application/gzip")
        site.routes["/index.xml"] = Route(sitemap(site, "/a.xml", "/b.xml.gz", index=True),
                                          type="application/xml")
        report = ingest_url(engine, kb, f"{site.base}/index.xml", FAST)
    assert sorted(report.added) == [f"{site.base}/gum.html", f"{site.base}/withdrawal.html"]
    assert site.paths().count("/gum.html") == 1


def test_robots_txt_answers_decide_the_site(engine: Engine) -> None:
    kb = kb_of(engine)
    for status, fetched in ((403, False), (404, True), (503, False)):
        with web_site() as site:
            site.routes["/robots.txt"] = Route(b"no", status=status)
            site.page("/gum.html", GUM)
            report = ingest_url(engine, kb, f"{site.base}/gum.html", FAST)
        assert ("/gum.html" in site.paths()) is fetched, status
        assert bool(report.skipped) is not fetched


def test_the_cli_ingests_a_url_without_mangling_it(tmp_path: Path) -> None:
    with web_site() as site:
        site.page("/gum.html", GUM)
        args = ["--db", str(tmp_path / "kb.db"), "ingest", "--kb", "web", "--embedder",
                "hashing:256", "--delay", "0", "-q", f"{site.base}/gum.html"]
        result = CliRunner().invoke(app, args)
        assert result.exit_code == 0, result.output
        assert "web: 1 added, 0 replaced, 0 unchanged, 0 skipped" in result.output
        again = CliRunner().invoke(app, args)
    assert "0 added, 0 replaced, 1 unchanged" in again.output
    assert site.paths() == ["/robots.txt", "/gum.html", "/robots.txt", "/gum.html"]


def test_urls_and_validators_round_trip() -> None:
    assert normalise("HTTP://Example.COM:80/a b?q=é#frag") == "http://example.com/a%20b?q=%C3%A9"
    assert normalise("https://example.com") == "https://example.com/"
    assert normalise("../c", "https://example.com/a/b/") == "https://example.com/a/c"
    v = Validators('W/"abc def"', "Tue, 01 Oct 2024 10:00:00 GMT")
    url = "https://example.com/a"
    assert validators_of(source_of(url, v)) == v
    assert source_of(url, Validators()) == url and validators_of(url) == Validators()
    assert validators_of("/some/file.md") == Validators()


def test_requests_to_a_site_are_spaced_by_the_delay_or_its_crawl_delay(engine: Engine) -> None:
    kb = kb_of(engine)
    urls = ["/withdrawal.html", "/gum.html"]
    for robots, delay, least in (("", 0.3, 0.6), ("User-agent: *\nCrawl-delay: 1\n", 0, 2.0)):
        with web_site() as site:
            site.page("/robots.txt", robots, type="text/plain")
            site.page("/withdrawal.html", WITHDRAWAL)
            site.page("/gum.html", GUM)
            started = time.monotonic()
            ingest_url(engine, kb, [site.base + u for u in urls], WebOptions(delay=delay, timeout=5))
            assert time.monotonic() - started >= least  # robots.txt, then two pages, spaced


def test_without_the_web_extra_a_url_is_refused_before_anything_is_made(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "trafilatura", None)  # as if not installed
    result = CliRunner().invoke(app, ["--db", str(tmp_path / "kb.db"), "ingest", "--kb", "web",
                                      "http://127.0.0.1:9/page.html"])
    assert isinstance(result.exception, ConfigError)
    assert "pip install 'citewise[web]'" in str(result.exception)
    assert not (tmp_path / "kb.db").exists()  # no store, no knowledge base made
