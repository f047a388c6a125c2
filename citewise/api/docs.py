"""``/docs`` (Swagger UI) and ``/redoc`` (ReDoc) from files installed with the package, so the
API's pages work offline: the scripts and styles come from ``fastapi-offline`` (a dependency
of the ``serve`` extra, its files under ``/docs-assets``), never from a CDN, and the pages ask
for no web font and no spec validator either; their Content-Security-Policy lets the browser
load nothing from any other host. ReDoc's script is served with one change: its sidebar's
"API docs by Redocly" link no longer shows its maker's logo from a CDN (a load the policy
refused, and the browser's console showed as an error), so it asks for none.
"""

from __future__ import annotations

import re
from functools import lru_cache
from importlib.resources import files

from fastapi import FastAPI, Request
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html
from fastapi.responses import HTMLResponse, Response
from fastapi.staticfiles import StaticFiles

ASSETS = "/docs-assets"
SWAGGER_PARAMETERS = {"validatorUrl": None}  # Swagger UI's default sends the spec to a validator
REDOC = "redoc.standalone.js"
# what ReDoc 2 loads from its maker's CDN (the sidebar's logo); "data:," is an image that fails
# at once, without a request, and ReDoc then leaves the image out
CDN = re.compile(r"https://cdn\.redoc\.ly/[^\"'`\s]*")
# the pages load from this service only
POLICY = ("default-src 'self'; script-src 'self' 'unsafe-inline'; style-src 'self' 'unsafe-inline'; "
          "img-src 'self' data:; font-src 'self' data:; worker-src 'self' blob:; "
          "connect-src 'self'; frame-ancestors 'none'")


def _local(page: HTMLResponse) -> HTMLResponse:
    page.headers["Content-Security-Policy"] = POLICY
    return page


@lru_cache(maxsize=1)
def redoc_script() -> str:
    """ReDoc's installed script, asking nothing of its CDN (module docstring)."""
    return CDN.sub("data:,", (files("fastapi_offline") / "static" / REDOC).read_text("utf-8"))


def add_docs(app: FastAPI) -> None:
    """Serve ``/docs`` and ``/redoc`` on ``app`` (made with ``docs_url=redoc_url=None``)."""
    static = files("fastapi_offline") / "static"

    @app.get(f"{ASSETS}/{REDOC}", include_in_schema=False)  # before the folder's own file
    def redoc_js() -> Response:
        return Response(redoc_script(), media_type="text/javascript",
                        headers={"Cache-Control": "public, max-age=3600"})

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
            redoc_js_url=f"{root}{ASSETS}/{REDOC}",
            redoc_favicon_url=f"{root}{ASSETS}/favicon.png", with_google_fonts=False,
        ))
