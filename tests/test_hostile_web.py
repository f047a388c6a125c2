"""Hostile web pages, sitemaps and servers: the extractor (trafilatura), the Markdown made of
what it kept, and the sitemap parser stay linear on a megabyte of pathological input, and an
entity bomb in a sitemap is never expanded. As in ``test_hostile_parsers.py``, the time bounds
are generous: what they pin is that nothing is quadratic. A server that drips its answer a
byte at a time (TLS hello, headers or body) is cut off at the page's deadline."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from citewise.errors import DocumentError, FetchError
from citewise.web import Hosts, pages, sitemaps
from citewise.web.fetch import Fetcher, Response, Validators
from tests.web_site import drip_server, self_signed

pytestmark = pytest.mark.heavy  # servers, processes, deadlines or megabytes: make test, not make unit

MB = 1024 * 1024
linear = pytest.mark.timeout(90, method="thread")
ABBREVIATIONS = "a. B Dr. C e.g. D J. E approx. F "


def page(html: str) -> pages.Page:
    return pages.read(Response("http://127.0.0.1/p.html", 200, "text/html", "utf-8",
                               html.encode(), Validators()))


@linear
def test_extraction_is_linear_on_a_megabyte_of_blocks_lists_and_tables() -> None:
    block = ("<h2>Part</h2><p>" + ABBREVIATIONS * 30 + "</p><ul><li>one<ul><li>two<ul><li>three"
             "</li></ul></li></ul></li></ul><table><tr><td>cell</td><td>x</td></tr></table>")
    found = page("<html><body><main>" + block * (MB // len(block)) + "</main></body></html>")
    assert found.sections and found.sections[0].heading == ("Part",)


@linear
@pytest.mark.parametrize(("unit", "kept"), [
    ("<h2>h</h2>", ""),  # a heading per ten bytes: the most sections a megabyte makes; no text
    ("<span>w</span> ", ""),  # an element per word
    ("<p>word word word</p>", "word word word"),
    ("<a href='/x'>link</a> ", ""),  # links to collect
], ids=["headings", "spans", "paragraphs", "links"])
def test_extraction_is_linear_on_a_megabyte_of_small_elements(unit: str, kept: str) -> None:
    found = page("<html><head><title>t</title></head><body>" + unit * (MB // len(unit)) + "</body></html>")
    assert found.title == "t"
    text = " ".join(p for s in found.sections for p in s.paragraphs)
    assert kept in text and (not kept or found.sections)
    if "href" in unit:
        assert found.links and set(found.links) == {"/x"}  # as written; the crawler resolves them


@linear
@pytest.mark.parametrize(("nested", "kept"), [
    ("<ul>" + "<li>x<ul>" * 100_000 + "</ul>", "- x"),
    ("<div>" * 200_000 + "text", None),  # refused: too deep to read
    (("<table><tr><td>" * 60 + "cell text " * 50 + "</td></tr></table>" * 60) * 20, "| cell text"),
], ids=["lists", "divs", "tables"])
def test_deeply_nested_pages_end_quickly(nested: str, kept: str | None) -> None:
    """Read, or refused with what to do; either way at once."""
    if kept is None:
        with pytest.raises(DocumentError, match="nested over 200 deep; flatten it"):
            page("<html><body>" + nested + "</body></html>")
        return
    found = page("<html><body>" + nested + "</body></html>")
    assert any(p.startswith(kept) for s in found.sections for p in s.paragraphs)


@linear
def test_a_sitemap_entity_bomb_is_not_expanded() -> None:
    lol = "".join(f'<!ENTITY l{i} "&l{i - 1};&l{i - 1};&l{i - 1};&l{i - 1};&l{i - 1};&l{i - 1};'
                  f'&l{i - 1};&l{i - 1};&l{i - 1};&l{i - 1};">' for i in range(1, 10))
    raw = (f'<?xml version="1.0"?><!DOCTYPE urlset [<!ENTITY l0 "http://a/">{lol}]>'
           '<urlset><url><loc>&l9;</loc></url></urlset>').encode()
    try:
        found = sitemaps.parse(raw, MB)
    except DocumentError as e:  # libxml2's own amplification limit
        assert "entity" in str(e)
    else:
        assert sum(map(len, found.urls)) < 1000


@linear
def test_a_megabyte_sitemap_is_one_pass() -> None:
    entry = "<url><loc>http://127.0.0.1/page.html</loc><lastmod>2024-01-01</lastmod></url>"
    raw = ("<urlset>" + entry * (MB // len(entry)) + "</urlset>").encode()
    assert len(sitemaps.parse(raw, 2 * MB).urls) == MB // len(entry)


HEADERS = b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\n"
DRIPS = {  # what the server sends at once, then what it drips: ~10 s of it at 4 bytes a second
    "headers": (b"", b"HTTP/1.1 200 OK\r\nX-Padding: " + b"a" * 40),
    "body": (HEADERS + b"Content-Length: 40\r\n\r\n", b"<p>" + b"a" * 37),
    # cut short, it would look whole (it ends as the connection does): it must not pass
    "body-to-close": (HEADERS + b"Connection: close\r\n\r\n", b"<p>" + b"a" * 37),
    "tls-headers": (b"", b"HTTP/1.1 200 OK\r\nX-Padding: " + b"a" * 40),  # a record a byte
}


@pytest.mark.timeout(60, method="thread")
@pytest.mark.parametrize("kind", DRIPS)
def test_a_server_dripping_its_answer_is_cut_off_at_the_page_deadline(
        kind: str, tmp_path: Path) -> None:
    head, drip = DRIPS[kind]
    fetcher = Fetcher(Hosts.any(), timeout=1.0, max_bytes=MB)
    server_tls = None
    if kind.startswith("tls"):
        server_tls, fetcher.tls = self_signed(tmp_path)
    with drip_server(drip, every=0.25, head=head, tls=server_tls) as server:
        scheme = "https" if server_tls else "http"
        started = time.monotonic()
        with pytest.raises(FetchError) as caught:
            fetcher.get(f"{scheme}://127.0.0.1:{server.port}/page.html", None,
                        lambda _: None, lambda _: None, lambda _: None)
        took = time.monotonic() - started
    assert caught.value.reason == "took over 1 s; not fetched"
    assert took < 2.5, f"{kind}: the fetch took {took:.1f} s with a 1 s deadline"
