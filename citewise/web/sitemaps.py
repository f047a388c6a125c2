"""Sitemaps (sitemaps.org): a ``<urlset>`` lists pages, a ``<sitemapindex>`` lists sitemaps.

The XML is parsed by lxml with entities left unresolved and no DTD or network access (an
entity-expansion bomb stays its own size), after a gzip sitemap is inflated up to the page
size limit; reading the ``<loc>`` elements is one pass over the tree.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass

from citewise.errors import DocumentError


@dataclass(frozen=True)
class Sitemap:
    """The URLs a sitemap lists; ``index`` when they are sitemaps, not pages."""

    urls: list[str]
    index: bool


def _inflate(raw: bytes, cap: int) -> bytes:
    if raw[:2] != b"\x1f\x8b":
        return raw
    inflate = zlib.decompressobj(16 + zlib.MAX_WBITS)
    try:
        out = inflate.decompress(raw, cap + 1)
    except zlib.error:
        raise DocumentError("a corrupt gzip sitemap") from None
    if len(out) > cap or inflate.unconsumed_tail:
        raise DocumentError(f"a gzip sitemap inflating past {cap:,} bytes")
    return out


def parse(raw: bytes, cap: int) -> Sitemap:
    """The sitemap in ``raw`` (XML, or gzip of it); ``DocumentError`` if it is not one."""
    from lxml import etree

    parser = etree.XMLParser(resolve_entities=False, no_network=True, load_dtd=False,
                             huge_tree=False, remove_comments=True, remove_pis=True)
    try:
        root = etree.fromstring(_inflate(raw, cap), parser=parser)
    except etree.XMLSyntaxError as e:
        raise DocumentError(f"not well-formed XML ({e.msg})") from None
    kind = etree.QName(root).localname if isinstance(root.tag, str) else ""
    if kind not in ("urlset", "sitemapindex"):
        raise DocumentError(f"XML whose root is <{kind}>, not a sitemap (<urlset> or <sitemapindex>)")
    entry = "{*}sitemap/{*}loc" if kind == "sitemapindex" else "{*}url/{*}loc"
    urls = [" ".join((loc.text or "").split()) for loc in root.iterfind(entry)]
    return Sitemap([u for u in urls if u], kind == "sitemapindex")
