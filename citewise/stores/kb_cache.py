"""What a store keeps of each knowledge base between calls: its dense matrix and its in-memory
keyword index, each for the version of the knowledge base it was read at, under one byte budget.

One ``KBCache`` is shared by every store a server process opens on one database (one per
worker thread, ``api/deps.py``), so the budget bounds the process, not each thread. Entries
are ``(kind, kb id)`` pairs in one least-recently-used order: a new entry pushes out the
oldest until the total fits ``limit_bytes`` (the newest always stays, even alone over it).
An entry whose version is not the knowledge base's current one is never served: the version is
read on every search, so a stateless worker sees other workers' writes on its next call.

``fetch`` builds a missing entry under a lock of its own (one per kind and knowledge base), so
two threads asking for the same index build it once, while other knowledge bases are served
meanwhile. Hits, misses (builds) and evictions are counted per kind for ``/metrics``.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol, TypeVar

from citewise.stores.base import TermCounts

KINDS = ("dense", "keyword")


class Versioned(Protocol):
    @property
    def version(self) -> int: ...

    @property
    def nbytes(self) -> int: ...


T = TypeVar("T", bound=Versioned)


@dataclass(frozen=True)
class CacheStats:
    """Counts since the cache was made, and what it holds now, for one kind of entry."""

    kind: str
    hits: int
    misses: int
    evictions: int
    entries: int
    bytes: int


class KBCache:
    def __init__(self, limit_bytes: int) -> None:
        self.limit_bytes = limit_bytes
        self.entries: OrderedDict[tuple[str, int], Versioned] = OrderedDict()
        self.used = 0
        self.sizes: dict[int, tuple[int, int]] = {}  # kb id -> (version, chunk count)
        self.terms = TermCounts()
        self.lock = threading.Lock()
        self._building: dict[tuple[str, int], threading.Lock] = {}
        self._counts = {kind: [0, 0, 0] for kind in KINDS}  # hits, misses, evictions

    def get(self, kind: str, kb_id: int, version: int, count: bool = True) -> Versioned | None:
        """The entry of ``kb_id`` at ``version`` (a hit moves it to the back), else None.
        ``count=False``: a read beside a search (its chunk records), not a hit of its own."""
        with self.lock:
            return self._get(kind, kb_id, version, count)

    def _get(self, kind: str, kb_id: int, version: int, count: bool = True) -> Versioned | None:
        found = self.entries.get((kind, kb_id))
        if found is None or found.version != version:
            return None
        self.entries.move_to_end((kind, kb_id))
        self._counts[kind][0] += count
        return found

    def fetch(self, kind: str, kb_id: int, version: int, build: Callable[[], T]) -> T:
        """The entry at ``version``, else ``build()`` kept (one build at a time per entry;
        the built entry may be of a newer version, read in the build's own snapshot)."""
        cached = self.get(kind, kb_id, version)
        if cached is not None:
            return cached  # type: ignore[return-value]  # what build() made for this kind
        with self.lock:
            building = self._building.setdefault((kind, kb_id), threading.Lock())
        with building:
            with self.lock:
                cached = self._get(kind, kb_id, version)  # built by the thread we waited for
                if cached is not None:
                    return cached  # type: ignore[return-value]
                self._counts[kind][1] += 1
            made = build()
            self.keep(kind, kb_id, made)
            return made

    def keep(self, kind: str, kb_id: int, entry: Versioned) -> None:
        with self.lock:
            old = self.entries.pop((kind, kb_id), None)
            if old is not None:
                self.used -= old.nbytes
            self.entries[(kind, kb_id)] = entry
            self.used += entry.nbytes
            while self.used > self.limit_bytes and len(self.entries) > 1:
                (gone_kind, _), gone = self.entries.popitem(last=False)
                self.used -= gone.nbytes
                self._counts[gone_kind][2] += 1

    def held(self, kind: str) -> list[int]:
        """The knowledge-base ids of ``kind``'s entries, least recently used first."""
        with self.lock:
            return [kb for k, kb in self.entries if k == kind]

    def forget(self, kb_id: int) -> None:
        with self.lock:
            for kind in KINDS:
                old = self.entries.pop((kind, kb_id), None)
                if old is not None:
                    self.used -= old.nbytes
                self._building.pop((kind, kb_id), None)
            self.sizes.pop(kb_id, None)
            self.terms.forget(kb_id)

    def stats(self) -> list[CacheStats]:
        with self.lock:
            held = {kind: [e.nbytes for (k, _), e in self.entries.items() if k == kind]
                    for kind in KINDS}
            return [CacheStats(kind, self._counts[kind][0], self._counts[kind][1],
                               self._counts[kind][2], len(held[kind]), sum(held[kind]))
                    for kind in KINDS]
