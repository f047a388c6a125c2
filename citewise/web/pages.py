"""A fetched page's text, title and links, by its media type.

HTML: trafilatura (a maintained main-content extractor) finds the page's main text, leaving
out menus, footers and other boilerplate, and its headings (``<head rend="h2">``), paragraphs,
lists and tables become Markdown here, in one pass over the blocks it kept, so that chunks
keep their section headings as they do for files (``markdown.parse_markdown``). A page it
finds no main text in is read whole by citewise's own HTML reader (``loaders.read_html``).
The title is the page's ``<title>``, else its first ``#`` heading. A ``<meta name="robots">``
of ``noindex`` keeps a page out, ``nofollow`` keeps its links from being followed, as does a
link's own ``rel="nofollow"``.

Markdown, plain text, PDF and DOCX are read by the same readers as files (``loaders.py``);
XML is a sitemap (``sitemaps.py``). Text in another charset than UTF-8, as the server
declared it, is converted first.
"""

from __future__ import annotations

import codecs
from dataclasses import dataclass
from typing import Any

from citewise.errors import ConfigError, DocumentError
from citewise.ingest.loaders import read_docx, read_html, read_markdown, read_pdf, read_text
from citewise.ingest.markdown import parse_markdown
from citewise.records import Section
from citewise.web.fetch import Response

HTML_TYPES = frozenset({"text/html", "application/xhtml+xml"})
TEXT_READERS = {"text/plain": read_text, "text/markdown": read_markdown,
                "text/x-markdown": read_markdown}
BINARY_READERS = {
    "application/pdf": read_pdf,
    "application/vnd.openxmlformats-officedocument.wordprocessingml.document": read_docx,
}
SITEMAP_TYPES = frozenset({"application/xml", "text/xml", "application/gzip", "application/x-gzip"})
PAGE_TYPES = HTML_TYPES | frozenset(TEXT_READERS) | frozenset(BINARY_READERS)
INSTALL = "reading web pages needs the web extra: pip install 'citewise[web]'"


@dataclass(frozen=True)
class Page:
    """What a page holds: its title and sections, the links to follow, and whether it may
    be stored (``<meta name="robots" content="noindex">`` says not)."""

    title: str
    sections: list[Section]
    links: list[str]
    index: bool = True


def check_installed() -> None:
    """``ConfigError`` saying how to install the extractor, when it is missing."""
    try:
        import trafilatura  # noqa: F401
    except ImportError:
        raise ConfigError(INSTALL) from None


def read(response: Response) -> Page:
    """The page a 200 response holds (``response.media_type`` is one of ``PAGE_TYPES``)."""
    media, name = response.media_type, response.url
    if media in HTML_TYPES:
        return _html(response)
    raw = response.body
    if media in TEXT_READERS:
        if response.charset and _codec(response.charset) not in ("utf-8", None):
            raw = raw.decode(response.charset, errors="replace").encode("utf-8")
        return Page(*TEXT_READERS[media](raw, name), [])
    return Page(*BINARY_READERS[media](raw, name), [])


def _codec(charset: str) -> str | None:
    try:
        return codecs.lookup(charset).name
    except LookupError:
        return None


def _robots_meta(tree: Any) -> set[str]:
    words: set[str] = set()
    for meta in tree.iter("meta"):
        if (meta.get("name") or "").strip().lower() in ("robots", "citewise"):
            words.update(w.strip().lower() for w in (meta.get("content") or "").split(","))
    return words


def _html(response: Response) -> Page:
    import lxml.html
    import trafilatura

    source: str | bytes = response.body
    if response.charset and _codec(response.charset):
        source = response.body.decode(response.charset, errors="replace")
    tree = trafilatura.load_html(source)
    if tree is None:
        raise DocumentError("not readable HTML")
    meta = _robots_meta(tree)
    index = not ({"noindex", "none"} & meta)
    links = []
    if not ({"nofollow", "none"} & meta):
        links = [a.get("href", "") for a in tree.iter("a")
                 if "nofollow" not in (a.get("rel") or "").lower().split()]
    title = " ".join((tree.findtext(".//title") or "").split())
    found = trafilatura.bare_extraction(tree, url=response.url, include_tables=True,
                                        include_comments=False, include_formatting=False,
                                        favor_recall=True)
    body = getattr(found, "body", None)
    if body is None:  # no main text found: the whole page, as a file's HTML is read
        h1, sections = read_html(lxml.html.tostring(tree, encoding="utf-8"), response.url)
    else:
        h1, sections = parse_markdown(body_markdown(body), response.url)
    return Page(title or h1, sections, links, index)


def _text(element: Any) -> str:
    return " ".join("".join(element.itertext()).split())


def body_markdown(body: Any) -> str:
    """Markdown of trafilatura's extracted body: each top-level block read once (a nested
    list or table is part of its item's or cell's text), so the cost is linear in the text."""
    for br in body.iter("lb"):
        br.tail = " " + (br.tail or "")
    md: list[str] = []
    for block in body:
        tag = block.tag if isinstance(block.tag, str) else ""
        if tag == "head":
            rend = block.get("rend") or "h2"
            level = int(rend[1]) if len(rend) == 2 and rend[1] in "123456" else 2
            md.append(f"\n{'#' * level} {_text(block)}\n")
        elif tag == "list":
            md.append("\n" + "\n".join(f"- {t}" for item in block.iterfind("item")
                                       if (t := _text(item))) + "\n")
        elif tag == "table":
            rows = ["| " + " | ".join(_text(c) for c in row.iterfind("cell")) + " |"
                    for row in block.iterfind("row")]
            md.append("\n" + "\n".join(rows) + "\n")
        elif tag and (text := _text(block)):
            md.append(f"\n{text}\n")
    return "\n".join(md)
