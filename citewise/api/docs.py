"""``/docs`` (Swagger UI) and ``/redoc`` (ReDoc) from files installed with the package, so the
API's pages work offline: the scripts and styles come from ``fastapi-offline`` (a dependency
of the ``serve`` extra, its files under ``/docs-assets``), never from a CDN, and the pages ask
for no web font and no spec validator either; their Content-Security-Policy lets the browser
load nothing from any other host.
"""

from __future__ import annotations

from importlib.resources import files

from fastapi import FastAPI, Request
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles

ASSETS = "/docs-assets"
SWAGGER_PARAMETERS = {"validatorUrl": None}  # Swagger UI's default sends the spec to a validator
# the pages load from this service only: ReDoc's sidebar shows its maker's logo from a CDN,
# which this keeps the browser from asking for (the image is left out, nothing else changes)
POLICY = ("default-src 'self'; script-src 'self' 'unsafe-inline'; style-src 'self' 'unsafe-inline'; "
          "img-src 'self' data:; font-src 'self' data:; worker-src 'self' blob:; "
          "connect-src 'self'; frame-ancestors 'none'")


def _local(page: HTMLResponse) -> HTMLResponse:
    page.headers["Content-Security-Policy"] = POLICY
    return page


def add_docs(app: FastAPI) -> None:
    """Serve ``/docs`` and ``/redoc`` on ``app`` (made with ``docs_url=redoc_url=None``)."""
    static = files("fastapi_offline") / "static"
    app.mount(ASSETS, StaticFiles(directory=str(static)), name="docs-assets")

    @app.get("/docs", include_in_schema=False)
    def swagger(request: Request) -> HTMLResponse:
        root = request.scope.get("root_path", "")
        return _local(get_swagger_ui_html(
            openapi_url=f"{root}{app.openapi_url}", title=f"{app.title} - Swagger UI",
            swagger_js_url=f"{root}{ASSETS}/swagger-ui-bundle.js",
            swagger_css_url=f"{root}{ASSETS}/swagger-ui.css",
            swagger_favicon_url=f"{root}{ASSETS}/favicon.png",
            swagger_ui_parameters=SWAGGER_PARAMETERS,
        ))

    @app.get("/redoc", include_in_schema=False)
    def redoc(request: Request) -> HTMLResponse:
        root = request.scope.get("root_path", "")
        return _local(get_redoc_html(
            openapi_url=f"{root}{app.openapi_url}", title=f"{app.title} - ReDoc",
            redoc_js_url=f"{root}{ASSETS}/redoc.standalone.js",
            redoc_favicon_url=f"{root}{ASSETS}/favicon.png", with_google_fonts=False,
        ))
