"""The services of one store URL in one process (``Services``), made once and shared by every
route and middleware (``services_for``)."""

from __future__ import annotations

import threading
from collections.abc import Callable

from fastapi import FastAPI

from citewise.api.compute import FairCompute
from citewise.api.fetches import WebFetches
from citewise.api.job_runner import service_runner
from citewise.api.keys import KeyCache
from citewise.api.origins import WidgetOrigins
from citewise.api.settings import Settings
from citewise.engine import Engine
from citewise.ingest.jobs import ThreadStores
from citewise.ratelimit import open_limiter
from citewise.stores import Store
from citewise.stores.kb_cache import KBCache
from citewise.tenancy import Tenants


class Services:
    """One per store URL and process: a store connection per worker thread (SQLite connections
    are not shared between threads), the per-key rate limiter (counts in Redis or the store,
    shared by every process), the compute slots, the runner of ingestion jobs and the budget
    of URL requests (``fetches.py``)."""

    def __init__(self, settings: Settings) -> None:
        self.db, self.settings = settings.db, settings
        self._stores = ThreadStores(settings.db)
        self.store: Callable[[], Store] = self._stores
        redis = settings.redis_url.get_secret_value() if settings.redis_url else None
        self.limiter = open_limiter(self.store, redis, settings.redis_prefix)
        # the model and numpy share the cores: more embedding threads at once than cores only
        # thrash (measured: 50 concurrent asks on 2 cores fell to a fraction of a request/s)
        self.compute = FairCompute(settings.slots, settings.per_tenant_slots,
                                   settings.tenant_queue, settings.provider_deadline_s)
        self.jobs = service_runner(self, settings.slots)
        self.keys = KeyCache(settings.key_cache_s)
        self.fetches = WebFetches(settings.web_fetches, settings.tenant_fetches)
        self.origins = WidgetOrigins(settings.key_cache_s)  # what a CORS preflight may be (cors.py)

    @property
    def cache(self) -> KBCache | None:
        """The cache of knowledge bases this process's stores share (None before the first)."""
        return self._stores.cache

    def engine(self) -> Engine:
        return Engine(self.store(), provider_detail=False)

    def tenants(self) -> Tenants:
        return self.store().tenants

    def close(self) -> None:
        self.jobs.close()
        self._stores.close()
        self.limiter.close()


_services_lock = threading.Lock()


def services_for(app: FastAPI, settings: Settings) -> Services:
    registry: dict[str, Services] = app.state.services
    with _services_lock:
        if settings.db not in registry:
            registry[settings.db] = Services(settings)
        return registry[settings.db]
