"""A memo bounded by the bytes it holds, not by its number of entries.

``functools.lru_cache(maxsize=65536)`` on the gate's chunk stem sets bounded entries, but an
entry holds its chunk's text (the key) and a set of ~100 stems: about 7 kB on SciFact, so a
full cache could reach ~450 MB in a server that sees many knowledge bases. Here each entry is
charged what it keeps alive (``size(key, value)``), and the least recently used entries go
once the total passes ``limit_bytes``. Safe to share between threads.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class BoundedCache(Generic[K, V]):
    def __init__(self, limit_bytes: int, size: Callable[[K, V], int]) -> None:
        self.limit_bytes = limit_bytes
        self.size = size
        self.used = 0
        self._entries: OrderedDict[K, tuple[V, int]] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, key: K, make: Callable[[K], V]) -> V:
        """The value of ``key``, made by ``make(key)`` and kept when not held (made outside
        the lock: two threads may both make a missing value; the values are equal)."""
        with self._lock:
            held = self._entries.get(key)
            if held is not None:
                self._entries.move_to_end(key)
                return held[0]
        value = make(key)
        nbytes = self.size(key, value)
        with self._lock:
            old = self._entries.pop(key, None)
            if old is not None:
                self.used -= old[1]
            self._entries[key] = (value, nbytes)
            self.used += nbytes
            while self.used > self.limit_bytes and len(self._entries) > 1:
                _, (_, gone) = self._entries.popitem(last=False)
                self.used -= gone
        return value

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self.used = 0
