"""The origins of the active widget keys: what a CORS preflight may be (``cors.py``), read
from the store at most every ``CITEWISE_KEY_CACHE_S`` seconds, as keys are (``keys.py``)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable


class WidgetOrigins:
    """The origins of the active widget keys, read at most every ``seconds`` (0: every time)."""

    def __init__(self, seconds: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.seconds, self.clock = seconds, clock
        self._origins: frozenset[str] = frozenset()
        self._until = float("-inf")
        self._lock = threading.Lock()

    def allowed(self, origin: str, read: Callable[[], set[str]]) -> bool:
        """Whether ``origin`` is listed on an active widget key (``read()`` gives them all)."""
        with self._lock:
            if self.clock() >= self._until:
                self._origins = frozenset(read())
                self._until = self.clock() + self.seconds
            return origin.lower() in self._origins

    def forget(self) -> None:
        """Read them again next time (a widget key was made or revoked)."""
        with self._lock:
            self._until = float("-inf")
