"""The request-body limit: an ASGI middleware in front of the app that answers 413 to a body over
its route's limit before any route, key check or form parser reads it.

A request whose ``Content-Length`` is over the limit is refused at once, unread; a body without
a length (``Transfer-Encoding: chunked``) is counted as the app reads it and refused the moment
it passes the limit, so at most one read (one network chunk) past the limit is ever held. JSON
routes take ``max_body_bytes``; the upload route takes ``max_files`` files of
``max_upload_bytes`` each, with room for each part's multipart headers.
"""

from __future__ import annotations

import json
import re
from typing import Any

from starlette.exceptions import HTTPException

from citewise.api.settings import Settings, settings_of

UPLOAD_ROUTE = re.compile(r"/v1/kbs/[^/]+/documents/?")
PART_OVERHEAD = 16 * 1024  # a part's boundary and headers (a long file name included)
FORM_OVERHEAD = 64 * 1024  # the closing boundary, and slack for clients' preambles


def body_limit(settings: Settings, method: str, path: str) -> int:
    """The largest body ``method path`` accepts."""
    if method == "POST" and UPLOAD_ROUTE.fullmatch(path):
        return settings.max_files * (settings.max_upload_bytes + PART_OVERHEAD) + FORM_OVERHEAD
    return settings.max_body_bytes


class BodyTooLarge(HTTPException):
    """Raised from ``receive`` when a streamed body passes its limit; an HTTPException so that
    FastAPI's body reader passes it on instead of calling it a parse error."""

    def __init__(self, limit: int) -> None:
        super().__init__(413, f"The request body is over this route's limit of {limit:,} bytes.")


async def _refuse(send: Any, error: BodyTooLarge) -> None:
    body = json.dumps({"detail": error.detail}).encode()
    await send({"type": "http.response.start", "status": 413, "headers": [
        (b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
        (b"connection", b"close"),
    ]})
    await send({"type": "http.response.body", "body": body})


def _declared_length(scope: dict) -> int | None:
    for name, value in scope["headers"]:
        if name == b"content-length" and value.strip().isdigit():
            return int(value)
    return None


class BodyLimit:
    """Refuses bodies over their route's limit with 413 (see the module docstring). Settings
    come from the app's ``get_settings`` (or its override), as routes get them."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        settings = settings_of(scope.get("app"))
        path = scope["path"].removeprefix(scope.get("root_path", ""))
        limit = body_limit(settings, scope["method"], path)
        declared = _declared_length(scope)
        if declared is not None and declared > limit:
            await _refuse(send, BodyTooLarge(limit))
            return
        received = 0
        tripped: BodyTooLarge | None = None
        started = False

        async def counted_receive() -> dict:
            nonlocal received, tripped
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit:
                    tripped = BodyTooLarge(limit)
                    raise tripped
            return message

        async def guarded_send(message: dict) -> None:
            nonlocal started
            if tripped is not None:  # whatever the app answers, the answer is 413
                if not started:
                    started = True
                    await _refuse(send, tripped)
                return
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, counted_receive, guarded_send)
        except BodyTooLarge:
            if not started:
                await _refuse(send, tripped or BodyTooLarge(limit))
