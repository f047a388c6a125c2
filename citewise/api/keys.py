"""Verified API keys, remembered briefly.

``KeyCache``: the store keeps only a key's sha256, so every request read its key's row;
verified keys are now remembered for ``CITEWISE_KEY_CACHE_S`` seconds (5; 0 turns it off). A
key revoked through this process is forgotten at once; one revoked through another process
(another worker, the CLI) is refused there at once and here within those seconds. Unknown
tokens are never remembered, so random tokens cannot fill it.
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections import OrderedDict
from collections.abc import Callable

from citewise.tenancy import ApiKey

KEYS_KEPT = 10_000


def digest(token: str) -> bytes:
    return hashlib.sha256(token.encode()).digest()


class KeyCache:
    """Verified keys by their token's sha256, each for ``seconds`` (see the module docstring)."""

    def __init__(self, seconds: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.seconds, self.clock = seconds, clock
        self._keys: OrderedDict[bytes, tuple[ApiKey, float]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, token: str) -> ApiKey | None:
        """The remembered key of ``token``, if it was verified less than ``seconds`` ago."""
        if self.seconds <= 0:
            return None
        with self._lock:
            found = self._keys.get(digest(token))
            if found is None:
                return None
            if found[1] <= self.clock():
                del self._keys[digest(token)]
                return None
            return found[0]

    def lookup(self, token: str, read: Callable[[str], ApiKey | None]) -> ApiKey | None:
        """``token``'s key: remembered, or ``read`` from the store (and remembered if found)."""
        key = self.get(token)
        if key is not None:
            return key
        key = read(token)
        if key is not None and self.seconds > 0:
            with self._lock:
                self._keys[digest(token)] = (key, self.clock() + self.seconds)
                self._keys.move_to_end(digest(token))
                while len(self._keys) > KEYS_KEPT:
                    self._keys.popitem(last=False)
        return key

    def forget(self, key_id: int) -> None:
        """Drop key ``key_id`` (revoked)."""
        with self._lock:
            for name in [d for d, (k, _) in self._keys.items() if k.id == key_id]:
                del self._keys[name]
