"""The compute slots, handed out one request at a time: the tenant with the fewest requests
running goes first, and among equals the request that has waited longest.

A request needs a lane of its tenant (at most ``per_tenant`` of a tenant's requests run at
once) and a slot (at most ``slots`` at once in the process). When a slot frees, it goes to the
oldest waiting request of a tenant with the fewest running, so a tenant that floods runs only
what no one else is waiting for: a slot it holds goes, once freed, to any other tenant waiting,
and its own queue never grows in front of theirs. Under an even load most waiting requests
belong to tenants with nothing running, so the order is first come, first served, and no
request waits many turns (``threading.Semaphore`` let a thread arriving as a slot freed take it
ahead of those waiting: the load benchmark's p99 was five times its p50). A request whose slot
was lent while a hosted provider answered (``lend``) takes the next free slot back before any
new request (``resume``), and keeps its lane throughout.

A tenant refused at the door within the last ``flood_s`` seconds (``refused``: it had its whole
share running and waiting, ``admission.py``) is flooding: its new requests get only the slots
no other tenant wants, none while another tenant's request runs or waits (nor does its queue,
older than any quiet tenant's request, win a tie as its lane frees). By the order above alone,
a flooder still ran one ask beside every quiet tenant's, so the quiet ones ran on one core
where they had two, and their p99 doubled (the load benchmark's fair profile: 2.2x); a slot
left free meanwhile is the flood's own cost. Tenants that merely queue are never flooding:
counting waiting requests instead (more than half the queue) flagged tenants of the default
load profile by chance, held them back, and their queues grew until the door refused them (p99
15 s). Nor are tenants served in turns (the one served longest ago first): under the default
profile a tenant with three clients then waited longer than one with two, p99 761 -> 1,304 ms.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections import Counter
from dataclasses import dataclass, field


@dataclass(eq=False)
class _Waiter:
    seq: int
    tenant: int
    new: bool  # needs a lane too (a new request), not only a slot (one resuming)
    wake: threading.Lock = field(default_factory=threading.Lock)
    granted: bool = False


class FairSlots:
    def __init__(self, slots: int, per_tenant: int, flood_s: float | None = None) -> None:
        self.free, self.per_tenant = slots, per_tenant
        self.flood_s = flood_s  # how long a refusal at the door marks a flooder (None: never)
        self._refused: dict[int, float] = {}  # tenant -> when last refused at the door
        self.lanes: Counter[int] = Counter()  # each tenant's requests holding a lane
        self._waiting: list[_Waiter] = []
        self._seq = itertools.count()
        self._lock = threading.Lock()

    def admit(self, tenant: int, timeout: float | None = None) -> bool:
        """Wait for a lane of ``tenant`` and a slot; False if ``timeout`` seconds passed first."""
        return self._wait(tenant, True, timeout)

    def resume(self, tenant: int) -> None:
        """Take a slot again after ``lend`` (the lane was kept)."""
        self._wait(tenant, False, None)

    def lend(self) -> None:
        """Give the slot back, keeping the lane (while a provider is waited for)."""
        with self._lock:
            self.free += 1
            self._grant()

    def leave(self, tenant: int, slot: bool = True) -> None:
        """Give back the lane, and the slot if it is held."""
        with self._lock:
            self.lanes[tenant] -= 1
            if self.lanes[tenant] <= 0:
                del self.lanes[tenant]
            self.free += 1 if slot else 0
            self._grant()

    def _wait(self, tenant: int, new: bool, timeout: float | None) -> bool:
        me = _Waiter(next(self._seq), tenant, new)
        me.wake.acquire()
        with self._lock:
            self._waiting.append(me)
            self._grant()
        if me.wake.acquire(timeout=-1 if timeout is None else timeout):
            return True
        with self._lock:
            if me.granted:  # its turn came as it gave up: it holds what it asked for
                return True
            self._waiting.remove(me)
            return False

    def refused(self, tenant: int) -> None:
        """``tenant`` was refused at the door: it floods for the next ``flood_s`` seconds."""
        if self.flood_s is not None:
            with self._lock:
                self._refused[tenant] = time.monotonic()

    def _flooding(self) -> set[int]:
        """The tenants whose new requests wait for slots no other tenant wants."""
        if not self._refused:
            return set()
        since = time.monotonic() - (self.flood_s or 0.0)
        for tenant in [t for t, at in self._refused.items() if at < since]:
            del self._refused[tenant]
        flooding = set(self._refused)
        others = {w.tenant for w in self._waiting} | set(self.lanes)
        return flooding if others - flooding else set()

    def _grant(self) -> None:
        """Hand free slots to waiters in turn (called holding the lock)."""
        while self.free and self._waiting:
            held = self._flooding()
            ready = [w for w in self._waiting
                     if not w.new or (self.lanes[w.tenant] < self.per_tenant
                                      and w.tenant not in held)]
            if not ready:
                return
            chosen = min(ready, key=lambda w: (self.lanes[w.tenant] if w.new else -1, w.seq))
            self._waiting.remove(chosen)
            self.free -= 1
            if chosen.new:
                self.lanes[chosen.tenant] += 1
            chosen.granted = True
            chosen.wake.release()
