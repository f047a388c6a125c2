"""``POST /v1/kbs/{kb}/urls``: pages and sitemaps fetched into a tenant's knowledge base, from
the hosts its operator lists in ``CITEWISE_WEB_HOSTS`` only (empty: the route answers 403).

No caller chooses a host the server connects to: each URL's host must be on the list, a
redirect or link leaving its site is not followed, and a host that resolves to an address that
is not public (loopback, private, link-local) is refused unless the list names that host
exactly (``web/urls.py``). Pages are fetched first, with no compute slot held, then embedded
in one (``web.ingest_url``).
"""

from __future__ import annotations

from fastapi import APIRouter, Depends
from fastapi.responses import JSONResponse

from ..web import Hosts, WebOptions, ingest_url
from ..web.urls import normalise
from .deps import Scoped, tenant_kb
from .models import PageResult, Problem, UrlsIn, UrlsOut, rejected_detail
from .settings import Settings, get_settings

router = APIRouter(prefix="/v1/kbs", tags=["knowledge bases"])


@router.post("/{kb}/urls", response_model=UrlsOut,
             responses={422: {"model": UrlsOut | Problem}})
def ingest_urls(body: UrlsIn, s: Scoped = Depends(tenant_kb),
                settings: Settings = Depends(get_settings)) -> JSONResponse:
    """Fetch pages or sitemaps (with ``depth``, the same-site pages they link to) into the
    knowledge base, each stored under its URL; robots.txt is honoured, and a page the server
    says is not modified, or whose text is the same, is left as it is.

    403 unless every URL's host is one the operator allows (``CITEWISE_WEB_HOSTS``). One result
    per page: 200 when at least one was stored or unchanged, else 422 with the results."""
    hosts = Hosts.listed(settings.web_hosts)
    for url in body.urls:
        hosts.check(normalise(url))
    s.check_compute()
    options = WebOptions(depth=body.depth, max_pages=min(body.max_pages or settings.web_max_pages,
                                                         settings.web_max_pages),
                         delay=settings.web_delay_s, max_page_bytes=settings.web_max_page_bytes,
                         hosts=hosts)
    report = ingest_url(s.engine(), s.kb, body.urls, options, hold=s.compute)
    results = [PageResult(url=u, status=status)
               for status in ("added", "replaced", "unchanged") for u in getattr(report, status)]
    results += [PageResult(url=skip.path, status="skipped", reason=skip.reason)
                for skip in report.skipped]
    if len(results) > len(report.skipped):
        return JSONResponse(UrlsOut(pages=results, chunks=report.chunks).model_dump())
    detail = rejected_detail([(p.url, p.reason) for p in results])
    return JSONResponse(UrlsOut(pages=results, chunks=0, detail=detail).model_dump(),
                        status_code=422)
