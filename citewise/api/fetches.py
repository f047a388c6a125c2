"""URL requests' own budget (``POST /v1/kbs/{kb}/urls``), apart from the worker threads that
every other request needs.

A fetch waits on another server, for up to ``CITEWISE_WEB_TIMEOUT_S`` a page and many pages
a request, so it may not hold what others queue for: the route is async, and its fetching
runs in threads bounded by a limiter of its own (``pool``: at most ``CITEWISE_WEB_FETCHES``
requests fetching in the process; more wait their turn holding no thread), while each tenant
may have ``CITEWISE_TENANT_FETCHES`` URL requests inside at once (``place``), the next answered
429 before any thread is taken when its key is remembered (``admission.KeyCache``). Before,
the fetches ran in the worker thread pool outside any tenant's limits: 70 URL requests of one
tenant on pages dripping a byte at a time held 64 threads, and every other tenant's ask and
``/healthz`` waited for one.
"""

from __future__ import annotations

import asyncio
import threading
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager

from anyio import CapacityLimiter

from citewise.errors import BusyError

RETRY_S = 5  # Retry-After of a tenant with its fetches all running: pages take seconds


class WebFetches:
    """Each tenant's URL requests inside (``place``), and the process's fetch threads (``pool``)."""

    def __init__(self, total: int, per_tenant: int) -> None:
        self.total, self.per_tenant = total, per_tenant
        self._inside: Counter[int] = Counter()
        self._lock = threading.Lock()
        self._pool: tuple[asyncio.AbstractEventLoop, CapacityLimiter] | None = None

    @contextmanager
    def place(self, tenant: int) -> Iterator[None]:
        """One of ``tenant``'s places for the request's whole life; ``BusyError`` (429) when
        it has all of them."""
        with self._lock:
            inside = self._inside[tenant]
            if inside >= self.per_tenant:
                raise BusyError(RETRY_S, inside)
            self._inside[tenant] = inside + 1
        try:
            yield
        finally:
            with self._lock:
                self._inside[tenant] -= 1
                if self._inside[tenant] <= 0:
                    del self._inside[tenant]

    def pool(self) -> CapacityLimiter:
        """The limiter of the fetch threads, on the running event loop (anyio's limiter wakes
        its waiters on the loop it was first used on: a test client may run another loop)."""
        loop = asyncio.get_running_loop()
        with self._lock:
            if self._pool is None or self._pool[0] is not loop:
                self._pool = (loop, CapacityLimiter(self.total))
            return self._pool[1]
