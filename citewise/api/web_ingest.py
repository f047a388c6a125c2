"""``POST /v1/kbs/{kb}/urls``: pages and sitemaps fetched into a tenant's knowledge base, from
the hosts and ports its operator lists in ``CITEWISE_WEB_HOSTS`` only (empty: the route
answers 403).

No caller chooses a host the server connects to: each URL's host and port must be on the
list, a redirect or link leaving its site is not followed, and a host that resolves to an
address that is not public (loopback, private, link-local) is refused unless the list names
that host exactly (``web/urls.py``). Each page has ``CITEWISE_WEB_TIMEOUT_S`` in all.

The route is async and holds a worker thread only for what reads the store: a tenant's URL
requests are counted first (``fetches.py``: past ``CITEWISE_TENANT_FETCHES``, 429 before any
thread when its key is remembered; a key read for the first time is read, then counted), the
pages are fetched in the fetch pool's threads with no store and no compute slot held, then
embedded in one of the tenant's compute slots, as an upload is.
"""

from __future__ import annotations

from anyio import to_thread
from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse

from citewise.api.deps import (
    KB_PATH,
    Caller,
    Scoped,
    Services,
    get_caller,
    get_services,
    get_token,
    resolve,
    tenant_only,
)
from citewise.api.models import PageResult, Problem, UrlsIn, UrlsOut, rejected_detail
from citewise.api.settings import settings_of
from citewise.web import Fetched, Hosts, WebOptions, fetch_urls, ingest_fetched, stored_sources
from citewise.web.urls import normalise

router = APIRouter(prefix="/v1/kbs", tags=["knowledge bases"])


@router.post("/{kb}/urls", response_model=UrlsOut,
             responses={422: {"model": UrlsOut | Problem}, 429: {"model": Problem}})
async def ingest_urls(body: UrlsIn, request: Request, kb: str = KB_PATH,
                      token: str | None = Depends(get_token),
                      services: Services = Depends(get_services)) -> JSONResponse:
    """Fetch pages or sitemaps (with ``depth``, the same-site pages they link to) into the
    knowledge base, each stored under its URL; robots.txt is honoured, and a page the server
    says is not modified, or whose text is the same, is left as it is.

    403 unless every URL's host and port are ones the operator allows (``CITEWISE_WEB_HOSTS``);
    429 when the tenant has ``CITEWISE_TENANT_FETCHES`` URL requests running already. One
    result per page: 200 when at least one was stored or unchanged, else 422 with the results."""
    settings = settings_of(request.app)
    known = services.keys.get(token) if token else None
    caller: Caller | None = None
    if known is not None:  # remembered: counted before any thread
        tenant = known.tenant_id
    else:  # read (and remembered), then counted
        caller = await to_thread.run_sync(_caller, request, token, services)
        tenant = caller.key.tenant_id
    with services.fetches.place(tenant):
        s, stored = await to_thread.run_sync(_prepare, request, token, services, caller, kb, body)
        options = WebOptions(depth=body.depth, max_pages=min(body.max_pages or settings.web_max_pages,
                                                             settings.web_max_pages),
                             delay=settings.web_delay_s, timeout=settings.web_timeout_s,
                             max_page_bytes=settings.web_max_page_bytes,
                             hosts=Hosts.listed(settings.web_hosts))
        fetched = await to_thread.run_sync(fetch_urls, body.urls, options, stored,
                                           limiter=services.fetches.pool())
        return await to_thread.run_sync(_ingest, s, fetched)


def _caller(request: Request, token: str | None, services: Services) -> Caller:
    """The caller as every tenant route checks it (key, widget keys refused, rate limit)."""
    return tenant_only(get_caller(request, token, services))


def _prepare(request: Request, token: str | None, services: Services, caller: Caller | None,
             kb: str, body: UrlsIn) -> tuple[Scoped, dict[str, str]]:
    """The caller (unless checked already), the knowledge base, every URL's host and port
    checked (403 before any fetch), the compute checks, and the pages stored (for conditional
    requests): what reads the store, in one thread."""
    s = resolve(caller or _caller(request, token, services), kb)
    hosts = Hosts.listed(settings_of(request.app).web_hosts)
    for url in body.urls:
        hosts.check(normalise(url))
    s.check_compute()
    return s, stored_sources(s.engine(), s.kb)


def _ingest(s: Scoped, fetched: Fetched) -> JSONResponse:
    with s.compute():
        report = ingest_fetched(s.engine(), s.kb, fetched)
    results = [PageResult(url=u, status=status)
               for status in ("added", "replaced", "unchanged") for u in getattr(report, status)]
    results += [PageResult(url=skip.path, status="skipped", reason=skip.reason)
                for skip in report.skipped]
    if len(results) > len(report.skipped):
        return JSONResponse(UrlsOut(pages=results, chunks=report.chunks).model_dump())
    detail = rejected_detail([(p.url, p.reason) for p in results])
    return JSONResponse(UrlsOut(pages=results, chunks=0, detail=detail).model_dump(),
                        status_code=422)
