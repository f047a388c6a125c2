"""A deadline on a whole fetch (connect, headers and body), however slowly a server sends.

A socket's timeout bounds one read, not an answer: a server that sends a byte every few
seconds never trips it, and checking the clock between reads does not help, since one read
of ``http.client``'s waits for a whole header line or block of body. A page that dripped a
byte every 3 s held its request (and a worker thread) for 300 s.

So one process-wide thread (``WATCHDOG``) keeps the deadlines of the fetches in flight, and
when one passes it shuts that fetch's socket down (``shutdown(SHUT_RDWR)``): the read blocked
on it returns at once, over plain HTTP and TLS alike, and the fetch sees ``Watch.expired`` and
reports that it took too long, whatever ``http.client`` made of the answer cut short (a body
that ends with its connection would look whole). The watchdog shuts down its own duplicate of
each socket (``socket.dup``), closed when the fetch ends, so a socket number that was closed
and reused by another connection is never shut down by mistake. Connecting is bounded by the
socket's timeout instead (``Watch.left``): a socket is watched once it is connected.
"""

from __future__ import annotations

import contextlib
import heapq
import itertools
import socket
import threading
import time
from collections.abc import Iterator


class Watch:
    """One fetch's deadline, and the sockets to shut down when it passes."""

    def __init__(self, dog: Watchdog, deadline: float) -> None:
        self._dog, self.deadline = dog, deadline
        self.expired = False  # the deadline passed and the watchdog cut the fetch off
        self.done = False
        self.sockets: list[socket.socket] = []

    def left(self) -> float:
        """Seconds until the deadline (negative once it passed)."""
        return self.deadline - time.monotonic()

    def attach(self, sock: socket.socket) -> None:
        """Shut ``sock`` down at the deadline (at once if it passed already)."""
        self._dog.attach(self, sock)


class Watchdog:
    """The thread that cuts off fetches past their deadlines (started on first use)."""

    def __init__(self) -> None:
        self._heap: list[tuple[float, int, Watch]] = []
        self._seq = itertools.count()
        self._changed = threading.Condition()
        self._thread: threading.Thread | None = None

    @contextlib.contextmanager
    def watch(self, seconds: float) -> Iterator[Watch]:
        """A deadline ``seconds`` from now for what runs inside; its sockets are let go at
        the end (before the caller closes them)."""
        watch = Watch(self, time.monotonic() + seconds)
        with self._changed:
            heapq.heappush(self._heap, (watch.deadline, next(self._seq), watch))
            if self._thread is None or not self._thread.is_alive():  # first use, or a fork
                self._thread = threading.Thread(target=self._run, name="citewise-fetch-deadlines",
                                                daemon=True)
                self._thread.start()
            self._changed.notify()
        try:
            yield watch
        finally:
            with self._changed:
                watch.done = True
                held, watch.sockets = watch.sockets, []
            for sock in held:
                sock.close()

    def attach(self, watch: Watch, sock: socket.socket) -> None:
        with self._changed:
            if watch.done:
                return
            held = sock.dup()
            watch.sockets.append(held)
            if watch.expired or watch.left() <= 0:
                watch.expired = True
                _cut(held)

    def _run(self) -> None:
        with self._changed:
            while True:
                while self._heap and self._heap[0][2].done:
                    heapq.heappop(self._heap)
                if not self._heap:
                    self._changed.wait()
                    continue
                wait = self._heap[0][0] - time.monotonic()
                if wait > 0:
                    self._changed.wait(wait)
                    continue
                _, _, watch = heapq.heappop(self._heap)
                watch.expired = True
                for sock in watch.sockets:
                    _cut(sock)


def _cut(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):  # not connected (any more): nothing to cut
        sock.shutdown(socket.SHUT_RDWR)


WATCHDOG = Watchdog()
