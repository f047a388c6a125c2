"""A request whose client has gone stops its provider calls.

``Departures`` is an ASGI middleware that gives each HTTP request an event, set when its client
disconnects, and makes it the one the request's provider calls stop on (``hosted.leaving``):
a hosted model's answer that no one will read is not waited for, and its connection to the
provider is closed (``guarded.py``). Once the app has read the request's body, the middleware
itself waits for the client's ``http.disconnect``; the app's own later ``receive`` calls wait
with it and get the same message. A route that hands its work to another thread hands the
request's context with it (``contextvars.copy_context``: ``ask.py``, ``completions.py``).
"""

from __future__ import annotations

import threading
from typing import Any

import anyio

from citewise import hosted


class Departures:
    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        gone = threading.Event()  # read by the threads that call providers
        read, left = anyio.Event(), anyio.Event()  # the body was read; the client has gone

        def leave() -> None:
            gone.set()
            left.set()

        async def receive_once() -> dict:
            if read.is_set():
                await left.wait()
                return {"type": "http.disconnect"}
            message = await receive()
            if message["type"] == "http.disconnect":
                leave()
            elif not message.get("more_body", False):
                read.set()
            return message

        async def listen() -> None:
            await read.wait()
            while (await receive())["type"] != "http.disconnect":
                pass
            leave()

        async with anyio.create_task_group() as tasks:
            tasks.start_soon(listen)
            try:
                with hosted.leaving(gone):
                    await self.app(scope, receive_once, send)
            finally:
                tasks.cancel_scope.cancel()
