"""CORS: which web pages may call the service from a browser. Only widget keys are used from a
page (a tenant key is a secret, never in one), so the origins the service answers are the
ones listed on its active widget keys.

A preflight (``OPTIONS`` with ``Access-Control-Request-Method``) carries no key: it is 204 with
the methods and headers a widget sends when its origin is listed on an active widget key of
any tenant, and 403 without them otherwise (it used to echo any origin). Those origins are read
from the store and kept for ``CITEWISE_KEY_CACHE_S`` seconds, as keys are (``admission.py``); a
widget key made or revoked through this process counts at once. A real response gets
``Access-Control-Allow-Origin`` only when a widget key accepted its origin (``deps.get_caller``).
"""

from __future__ import annotations

import json
from typing import Any

from anyio import to_thread

from citewise.api.compute import STORE_FAILED, public_detail
from citewise.api.services import services_for
from citewise.api.settings import settings_of
from citewise.errors import StoreError

PREFLIGHT_HEADERS = [
    (b"access-control-allow-methods", b"GET, POST"),
    (b"access-control-allow-headers", b"authorization, x-api-key, content-type, accept"),
    (b"access-control-max-age", b"600"),
    (b"vary", b"Origin"),
]
REFUSED = "This origin may not call the service: no widget key lists it."


async def _answer(send: Any, status: int, headers: list[tuple[bytes, bytes]], body: bytes = b"") -> None:
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


class Cors:
    """Answers preflights, and marks responses to widget keys (see the module docstring)."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = dict(scope["headers"])
        origin = headers.get(b"origin")
        if scope["method"] == "OPTIONS" and origin and b"access-control-request-method" in headers:
            await self._preflight(scope, origin, send)
            return

        async def send_marked(message: dict) -> None:
            allowed = scope.get("state", {}).get("cors_origin")
            if message["type"] == "http.response.start" and allowed:
                message["headers"] = [
                    *message.get("headers", []),
                    (b"access-control-allow-origin", allowed.encode()),
                    (b"access-control-expose-headers", b"Retry-After"),
                    (b"vary", b"Origin"),
                ]
            await send(message)

        await self.app(scope, receive, send_marked)

    async def _preflight(self, scope: dict, origin: bytes, send: Any) -> None:
        services = services_for(scope["app"], settings_of(scope["app"]))
        try:
            allowed = await to_thread.run_sync(  # the store is read in a worker thread
                services.origins.allowed, origin.decode("latin-1"),
                lambda: services.tenants().widget_origins())
        except StoreError as e:
            public_detail(e)  # logged
            body = json.dumps({"detail": STORE_FAILED}).encode()
            await _answer(send, 503, [(b"content-type", b"application/json")], body)
            return
        if allowed:
            await _answer(send, 204, [(b"access-control-allow-origin", origin), *PREFLIGHT_HEADERS])
            return
        body = json.dumps({"detail": REFUSED}).encode()
        await _answer(send, 403, [(b"content-type", b"application/json"), (b"vary", b"Origin")], body)
