"""The sockets under the provider SDKs' HTTP clients, held to the provider call's deadline.

The SDKs' timeouts are per read (and per write, per connect): a provider that sends a byte a
second never trips them, and one answer could hold a request for minutes. ``guard(client)``
puts a network backend under an ``httpx`` or ``httpx2`` client's connection pools whose
connections, while this thread makes a provider call (``hosted.current_call``), never wait
past the call's deadline: a read waits at most what is left of it, and one once it has passed
fails as a timeout (a drip is cut off within one byte's wait of the deadline). A read fails too
once the call's caller has gone (checked every ``TICK`` seconds while a read waits). The pool
then drops the connection, so the provider sees its caller leave. Outside a call (the CLI
without limits) the sockets behave as the SDKs set them.

The backend is swapped in through the clients' private attributes (``_transport._pool``,
``_network_backend``, the same in ``httpx`` and its fork ``httpx2``); a client of another
shape (a test's mock transport) is left as it is; ``tests/test_provider_deadline.py`` fails
if the libraries ever move them.
"""

from __future__ import annotations

import importlib
import time
from types import ModuleType
from typing import Any

from citewise import hosted

TICK = 0.25  # seconds a read waits before it looks again whether its caller has gone


def guard(client: Any) -> Any:
    """``client`` (an ``httpx.Client`` or ``httpx2.Client``) with its pools' sockets guarded."""
    transports = [getattr(client, "_transport", None), *getattr(client, "_mounts", {}).values()]
    for transport in transports:
        pool = getattr(transport, "_pool", None)
        backend = getattr(pool, "_network_backend", None)
        if backend is not None and not isinstance(backend, Backend):
            core = importlib.import_module(type(pool).__module__.partition(".")[0])
            pool._network_backend = Backend(backend, core)  # type: ignore[union-attr]
    return client


def _bounded(timeout: float | None, failure: type[Exception]) -> float | None:
    """``timeout``, cut to what is left of the current call; ``failure`` when nothing is."""
    call = hosted.current_call()
    if call is None:
        return timeout
    if call.stopped():
        raise failure(hosted.GONE)
    left = call.left()
    if left is None:
        return timeout
    if left <= 0:
        raise failure("the provider call's deadline passed")
    return left if timeout is None else min(timeout, left)


class Stream:
    """A connection of the pool (``httpcore``'s ``NetworkStream``), guarded."""

    def __init__(self, inner: Any, core: ModuleType) -> None:
        self.inner, self.core = inner, core

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        until = None if timeout is None else time.monotonic() + timeout
        while True:
            if hosted.current_call() is None:
                return self.inner.read(max_bytes, timeout)
            # what is left of the read's own timeout and of the call, a TICK at most
            own = None if until is None else max(0.001, until - time.monotonic())
            wait = _bounded(own, self.core.ReadTimeout)
            try:
                return self.inner.read(max_bytes, TICK if wait is None else min(wait, TICK))
            except self.core.ReadTimeout:
                if until is not None and time.monotonic() >= until:
                    raise

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self.inner.write(buffer, _bounded(timeout, self.core.WriteTimeout))

    def close(self) -> None:
        self.inner.close()

    def start_tls(self, ssl_context: Any, server_hostname: str | None = None,
                  timeout: float | None = None) -> Stream:
        inner = self.inner.start_tls(ssl_context, server_hostname,
                                     _bounded(timeout, self.core.ConnectTimeout))
        return Stream(inner, self.core)

    def get_extra_info(self, info: str) -> Any:
        return self.inner.get_extra_info(info)


class Backend:
    """The pool's network backend (``httpcore``'s ``NetworkBackend``), its streams guarded."""

    def __init__(self, inner: Any, core: ModuleType) -> None:
        self.inner, self.core = inner, core

    def connect_tcp(self, host: str, port: int, timeout: float | None = None,
                    local_address: str | None = None, socket_options: Any = None) -> Stream:
        timeout = _bounded(timeout, self.core.ConnectTimeout)
        return Stream(self.inner.connect_tcp(host, port, timeout, local_address, socket_options),
                      self.core)

    def connect_unix_socket(self, path: str, timeout: float | None = None,
                            socket_options: Any = None) -> Stream:
        timeout = _bounded(timeout, self.core.ConnectTimeout)
        return Stream(self.inner.connect_unix_socket(path, timeout, socket_options), self.core)

    def sleep(self, seconds: float) -> None:
        self.inner.sleep(seconds)
