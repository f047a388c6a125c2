"""The compute slots, shared fairly between tenants, and the providers a knowledge base may use.

A request that embeds or generates holds one of the process's compute slots (the cores run
that many embeddings at once) and one of its tenant's lanes (``CITEWISE_TENANT_SLOTS``), handed
out by ``slots.FairSlots`` (a freed slot goes to the tenant with the fewest running): a
tenant never runs more requests at once than its lanes, however many it sends; past
``CITEWISE_TENANT_QUEUE`` waiting ones it is answered 429 at once (its requests never fill the
server's worker threads), and so is a request that waited for a lane longer than the provider
deadline. While a hosted provider is waited for, the compute slot is lent to
others (``hosted.limits``): a network wait needs no core, so a slow or failing provider costs
its own tenant's lanes, never another tenant's turn at the cores. Each provider call gives up
after ``CITEWISE_PROVIDER_DEADLINE_S`` seconds, its retries and every byte included
(``guarded.py``), and stops when the request's client has gone (``departures.py``).

Which embedders and generators a knowledge base may use is the operator's choice
(``CITEWISE_EMBEDDERS``, ``CITEWISE_GENERATORS``); a tenant picks among them by name and
never names a URL of its own. A knowledge base stored with anything else (made before the
allowlist, or by the CLI) is refused before any provider is called.
"""

from __future__ import annotations

import logging
import threading
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager

from citewise import hosted
from citewise.api.settings import Settings
from citewise.api.slots import FairSlots
from citewise.embedders import questions_in_flight
from citewise.engine import PROVIDER_FAILED  # what a refusal says, and so does an error
from citewise.errors import (
    BusyError,
    CitewiseError,
    ConfigError,
    EmbedderError,
    GenerationError,
    NotAllowedError,
    StoreError,
)
from citewise.kb import KBConfig

FLOOD_S = 1.0  # a tenant refused for its share floods this long (``slots.FairSlots``)
EMBEDDER_FAILED = "the embedding provider failed; try again later"
STORE_FAILED = "the store is unavailable; try again later"
log = logging.getLogger(__name__)


def public_detail(error: CitewiseError) -> str:
    """What an HTTP caller is told. A provider's failure (its reply, its URL, the connection
    error) and the store's (its URL, the driver's message) are logged here and never shown.
    Any other message names only what the caller named: the store keeps a tenant's knowledge
    base under the tenant's own name, and looks it up within that tenant only."""
    if isinstance(error, EmbedderError | GenerationError | StoreError):
        log.warning("%s: %s", type(error).__name__, error)
        if isinstance(error, StoreError):
            return STORE_FAILED
        return EMBEDDER_FAILED if isinstance(error, EmbedderError) else PROVIDER_FAILED
    return str(error)


class FairCompute:
    def __init__(self, slots: int, per_tenant: int, queue: int, deadline: float | None) -> None:
        # refused at the door within a second: a tenant runs on slots no one else wants
        self.slots = FairSlots(slots, per_tenant, flood_s=FLOOD_S)
        self.per_tenant, self.queue, self.deadline = per_tenant, queue, deadline
        self._at_once: Counter[int] = Counter()  # each tenant's requests running or waiting
        self._lock = threading.Lock()
        self._held = threading.local()

    def check(self, tenant: int) -> None:
        """``BusyError`` when ``tenant`` has as many requests running and waiting as it may."""
        with self._lock:
            self._full(tenant)

    def _full(self, tenant: int) -> None:
        if self._at_once[tenant] >= self.per_tenant + self.queue:
            self.slots.refused(tenant)
            raise BusyError(1, self._at_once[tenant])

    @contextmanager
    def hold(self, tenant: int) -> Iterator[None]:
        """Run in one of ``tenant``'s lanes and a compute slot (``slots.py``: the tenant with
        the fewest running goes first), under the provider limits. From the wait on, the
        request counts as a question in flight, so a busy server embeds each question on one
        thread (``embedders/questions_in_flight.py``)."""
        with questions_in_flight.answering(), self._hold(tenant):
            yield

    @contextmanager
    def _hold(self, tenant: int) -> Iterator[None]:
        with self._lock:
            self._full(tenant)
            self._at_once[tenant] += 1
        try:
            if not self.slots.admit(tenant, timeout=self.deadline):
                raise BusyError(1, self._at_once[tenant])
            self._held.tenant, self._held.slot = tenant, True
            try:
                with hosted.limits(self.deadline, self._lend):
                    yield
            finally:
                self.slots.leave(tenant, slot=self._held.slot)
                self._held.slot = False
        finally:
            with self._lock:
                self._at_once[tenant] -= 1
                if self._at_once[tenant] <= 0:
                    del self._at_once[tenant]

    @contextmanager
    def _lend(self) -> Iterator[None]:
        """Give this thread's compute slot back while a provider is waited for."""
        if not getattr(self._held, "slot", False):
            yield
            return
        self._held.slot = False
        self.slots.lend()
        try:
            yield
        finally:
            self.slots.resume(self._held.tenant)
            self._held.slot = True


def _recorded(spec: str) -> str:
    """The name a knowledge base records for ``spec`` (what the embedder calls itself)."""
    prefix, _, arg = spec.strip().partition(":")
    if prefix == "openai-compatible":
        try:
            url, model = hosted.compatible_spec("embedder", arg)  # as the embedder reads it
        except ConfigError:
            return spec.strip()  # not a usable spec: recorded by no knowledge base
        return f"{prefix}:{url}#{model}"
    if prefix == "hashing" and not arg:
        return "hashing:256"
    return spec.strip()


def choose(kind: str, spec: str | None, allowed: list[str]) -> str:
    """The spec a tenant chose, if the operator allows it; the first allowed one if none."""
    if spec is None:
        return allowed[0]
    if spec not in allowed:
        raise NotAllowedError(kind, spec, allowed)
    return spec


def check_kb(name: str, config: KBConfig, settings: Settings) -> None:
    """``NotAllowedError`` when a stored knowledge base uses a provider the operator did not allow."""
    for kind, spec, allowed in (("embedder", config.embedder, settings.allowed_embedders),
                                ("generator", config.generator, settings.allowed_generators)):
        if _recorded(spec) not in {_recorded(a) for a in allowed}:
            raise NotAllowedError(kind, spec, allowed, what=f"{kind} of knowledge base {name!r} is")
