"""The FastAPI application: routers, error responses, health, metrics, the widget script and
its demo page (``demo.py``, off unless ``CITEWISE_DEMO_KEY`` names a widget key).

Every citewise error becomes a JSON ``{"detail": "..."}`` with the status of its kind in
``problems.STATUS``, the one table of them (5xx only when the store or model is unavailable);
a store name (``t3.docs``) never appears in a message, only the name the tenant chose; a
provider's or the store's failure is told in general words only (its reply, URL and connection
error are logged, ``compute.public_detail``). A body over its route's limit is refused (413)
before it is read (``limits.py``); a tenant's ask past its running and waiting share is a 429
at the door (``admission.py``), and so is its URL request past its share (``fetches.py``); a
request that fails validation is a 422 that does not echo it (``problems.py``); a request whose
client disconnects stops its provider calls (``departures.py``); CORS answers widget keys'
origins only (``cors.py``). No log line of the process carries a password (``logmask.py``).
"""

from __future__ import annotations

import logging
from contextlib import asynccontextmanager
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from anyio import to_thread
from fastapi import Depends, FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, JSONResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from citewise.api import admin, ask, completions, demo, jobs, kbs, mcp_http, passage_links, web_ingest
from citewise.api.admission import TenantGate
from citewise.api.compute import public_detail
from citewise.api.cors import Cors
from citewise.api.departures import Departures
from citewise.api.deps import Services, get_services, get_token, require_admin, services_for
from citewise.api.docs import add_docs
from citewise.api.limits import BodyLimit
from citewise.api.metrics import HttpLayer, Metrics
from citewise.api.problems import document_errors, internal_error, plain_path, status_of, validation_error
from citewise.api.settings import Settings, get_settings, settings_of
from citewise.errors import AccessError, CitewiseError, ForbiddenError, RateLimitError, StoreError
from citewise.stores.logmask import mask_log_lines

try:
    VERSION = version("citewise")
except PackageNotFoundError:  # run from a source tree
    VERSION = "0+unknown"
log = logging.getLogger(__name__)
WIDGET = Path(__file__).resolve().parent.parent / "ui" / "static" / "widget.js"
async def citewise_error(request: Request, error: CitewiseError) -> JSONResponse:
    headers = {"Retry-After": str(error.retry_after)} if isinstance(error, RateLimitError) else None
    if isinstance(error, AccessError) and not isinstance(error, ForbiddenError | RateLimitError):
        headers = {"WWW-Authenticate": "Bearer"}
    return JSONResponse({"detail": public_detail(error)}, status_code=status_of(error), headers=headers)


def create_app() -> FastAPI:
    """The app; settings come from ``get_settings`` (override it to configure a test app)."""
    mask_log_lines()  # no log line of the service's process carries a password

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        settings = settings_of(app)
        settings.require_admin_key()
        limiter = to_thread.current_default_thread_limiter()  # this event loop's pool
        limiter.total_tokens = max(limiter.total_tokens, settings.worker_threads)
        try:  # ingestion jobs queued, or left by a server that stopped or died
            services_for(app, settings).jobs.resume()
        except StoreError as e:  # the store is down: taken at a heartbeat once it is back
            log.warning("ingestion jobs not resumed yet: %s", e)
        async with mcp_http.serving(app, settings):
            yield
        opened, app.state.services = app.state.services, {}
        for services in opened.values():
            services.close()

    app = FastAPI(
        title="citewise", version=VERSION, lifespan=lifespan, dependencies=[Depends(plain_path)],
        docs_url=None, redoc_url=None,  # served from installed files by add_docs, not a CDN
        description="Answers from your documents with citations you can open, or a refusal that "
        "says why. Tenants and keys: `/v1/admin` (admin key); knowledge bases, documents, ask, "
        "search, passages and feedback: `/v1/kbs` (tenant key; a widget key asks one knowledge "
        "base from its origins); an upload is an ingestion job, polled at `/v1/jobs/{id}`. "
        "OpenAI-compatible chat: `/v1/chat/completions` and `/v1/models` "
        "(a knowledge base is a model). MCP (streamable HTTP, tenant key): `/v1/mcp`.",
    )
    app.state.services = {}
    app.state.metrics = Metrics()
    app.state.metrics.watch(lambda: [s.cache for s in list(app.state.services.values())
                                     if s.cache is not None])
    # the decorator form, called: add_exception_handler's type takes handlers of any Exception
    app.exception_handler(CitewiseError)(citewise_error)
    app.exception_handler(RequestValidationError)(validation_error)
    app.exception_handler(Exception)(internal_error)  # a bug's 500: {"detail": ...} too
    app.add_middleware(Departures)  # innermost: a request's provider calls stop when it leaves
    app.add_middleware(TenantGate)  # inside both: its 429s come after the body check, counted
    app.add_middleware(BodyLimit)  # inside HttpLayer: its 413s are counted too
    app.add_middleware(HttpLayer, metrics=app.state.metrics)
    app.add_middleware(Cors)  # outermost: a preflight is answered before anything counts it
    for module in (admin, kbs, web_ingest, jobs, ask, completions, mcp_http, demo, passage_links):
        app.include_router(module.router)

    @app.get("/healthz", tags=["service"])
    async def healthz() -> dict:
        """The process is up (async: it needs no worker thread, so a full pool cannot delay it)."""
        return {"status": "ok"}

    @app.get("/readyz", tags=["service"], responses={503: {"description": "store unavailable"}})
    def readyz(services: Services = Depends(get_services)) -> dict:
        """The store answers."""
        services.store().list_kbs()
        return {"status": "ready"}

    @app.get("/metrics", tags=["service"], response_class=Response,
             responses={200: {"content": {"text/plain": {}}}})
    def metrics(request: Request, token: str | None = Depends(get_token),
                settings: Settings = Depends(get_settings)) -> Response:
        """Prometheus metrics (admin key unless CITEWISE_METRICS_PUBLIC is set)."""
        if not settings.metrics_public:
            require_admin(token, settings)
        return Response(generate_latest(request.app.state.metrics.registry),
                        media_type=CONTENT_TYPE_LATEST)

    @app.get("/widget.js", tags=["service"], response_class=FileResponse)
    def widget() -> FileResponse:
        """The chat widget: `<script src=".../widget.js" data-kb="KB" data-key="WIDGET KEY">`."""
        return FileResponse(WIDGET, media_type="text/javascript",
                            headers={"Cache-Control": "public, max-age=300"})

    document_errors(app)
    add_docs(app)
    return app
