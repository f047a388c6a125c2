"""Who may come in: keys verified once and remembered briefly, and a tenant's asks counted at
the door, so a tenant that floods is refused before its requests cost anything.

Verified keys are remembered (``keys.py``).

``TenantGate``: an ASGI middleware in front of the routes that compute (ask, search, chat
completions). Each tenant may have ``CITEWISE_TENANT_SLOTS + CITEWISE_TENANT_QUEUE`` of them
inside the app at once; the next is answered 429 (``BusyError``, ``Retry-After: 1``) at the
door: no worker thread, no store read, no rate-limit write. The lanes in ``compute.py``
bound the same number, but only once a request reached them: before, a flood's requests went
through the key check, the rate limit and the knowledge base's look-up in worker threads first,
and those threads (one pool for all tenants) and the store's write lock are what every other
tenant's requests queue for. A token the cache does not know is looked up in a worker thread
once; a request without a known key goes on, and its route refuses it as before.
"""

from __future__ import annotations

import json
import re
import threading
from typing import Any

from citewise.api.services import services_for
from citewise.api.settings import settings_of
from citewise.errors import BusyError

COMPUTE_ROUTES = re.compile(r"/v1/kbs/[^/]+/(?:ask|search)/?|/v1/chat/completions/?")
def bearer(headers: list[tuple[bytes, bytes]]) -> str | None:
    """The API key a request carries (``Authorization: Bearer`` or ``X-API-Key``), as routes read it."""
    found = None
    for name, value in headers:
        if name == b"authorization":
            scheme, _, credentials = value.decode("latin-1").partition(" ")
            if scheme.lower() == "bearer" and credentials.strip():
                return credentials.strip()
        elif name == b"x-api-key" and value:
            found = value.decode("latin-1")
    return found


class TenantGate:
    """Counts each tenant's compute requests inside the app; refuses one over its share."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self._inside: dict[int, int] = {}
        self._lock = threading.Lock()

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["method"] != "POST" or not COMPUTE_ROUTES.fullmatch(
                scope["path"].removeprefix(scope.get("root_path", ""))):
            await self.app(scope, receive, send)
            return
        token = bearer(scope["headers"])
        key = None
        if token:
            app = scope["app"]
            settings = settings_of(app)
            services = services_for(app, settings)
            key = services.keys.get(token)  # a key not remembered: the route reads it
        if key is None:
            await self.app(scope, receive, send)
            return
        if key.kind == "widget":  # a refusal a widget's page may read, as routes' are
            origin = dict(scope["headers"]).get(b"origin", b"").decode("latin-1").lower()
            if origin in key.origins:
                scope.setdefault("state", {})["cors_origin"] = origin
        tenant, most = key.tenant_id, settings.per_tenant_slots + settings.tenant_queue
        with self._lock:
            inside = self._inside.get(tenant, 0)
            if inside >= most:
                refused = BusyError(1, inside)
            else:
                refused = None
                self._inside[tenant] = inside + 1
        if refused is not None:
            services.compute.slots.refused(tenant)  # it floods: it runs on slots no one wants
            await _refuse(send, refused)
            return
        try:
            await self.app(scope, receive, send)
        finally:
            with self._lock:
                self._inside[tenant] -= 1
                if not self._inside[tenant]:
                    del self._inside[tenant]


async def _refuse(send: Any, error: BusyError) -> None:
    body = json.dumps({"detail": str(error)}).encode()
    await send({"type": "http.response.start", "status": 429, "headers": [
        (b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
        (b"retry-after", str(error.retry_after).encode()),
    ]})
    await send({"type": "http.response.body", "body": body})
