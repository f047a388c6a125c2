"""Hostile web pages and sitemaps: the extractor (trafilatura), the Markdown made of what it
kept, and the sitemap parser stay linear on a megabyte of pathological input, and an entity
bomb in a sitemap is never expanded. As in ``test_hostile_parsers.py``, the time bounds are
generous: what they pin is that nothing is quadratic."""

from __future__ import annotations

import contextlib

import pytest

from citewise.errors import DocumentError
from citewise.web import pages, sitemaps
from citewise.web.fetch import Response, Validators

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
@pytest.mark.parametrize("unit", [
    "<h2>h</h2>",  # a heading per ten bytes: the most sections a megabyte makes
    "<span>w</span> ",  # an element per word
    "<p>word word word</p>",
    "<a href='/x'>link</a> ",  # links to collect
], ids=["headings", "spans", "paragraphs", "links"])
def test_extraction_is_linear_on_a_megabyte_of_small_elements(unit: str) -> None:
    page("<html><head><title>t</title></head><body>" + unit * (MB // len(unit)) + "</body></html>")


@linear
@pytest.mark.parametrize("nested", [
    "<ul>" + "<li>x<ul>" * 100_000 + "</ul>",
    "<div>" * 200_000 + "text",
    ("<table><tr><td>" * 60 + "cell text " * 50 + "</td></tr></table>" * 60) * 20,
], ids=["lists", "divs", "tables"])
def test_deeply_nested_pages_end_quickly(nested: str) -> None:
    with contextlib.suppress(DocumentError):  # refused is as good as read: the time matters
        page("<html><body>" + nested + "</body></html>")


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
