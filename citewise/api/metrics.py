"""Prometheus metrics of the HTTP layer, and the ASGI middleware that records them (CORS is
``cors.py``). Query-log analytics live in ``citewise/telemetry/``, not here.

    citewise_http_requests_total{method, route, status}
    citewise_http_request_duration_seconds{method, route}      (histogram)
    citewise_asks_total{kb, status}                             (answered / refused per knowledge base)
    citewise_kb_cache_hits_total{kind}, _misses_total{kind}, _evictions_total{kind}
    citewise_kb_cache_entries{kind}, citewise_kb_cache_bytes{kind}, citewise_kb_cache_budget_bytes

The ``kb_cache`` series are read from the process's caches of knowledge bases when scraped
(``stores/kb_cache.py``; ``kind`` is ``dense`` or ``keyword``): a miss is a build from the
store (first use, or the knowledge base was written), an eviction an entry pushed out by the
byte budget.

``route`` is the route's template (``/v1/kbs/{kb}/ask``), never the raw path; ``kb`` is
``tenant-id/name``. Each app has its own registry, so apps in one process never mix counts.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from citewise.stores.kb_cache import KINDS, KBCache


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.requests = Counter("citewise_http_requests", "HTTP requests by route and status",
                                ["method", "route", "status"], registry=self.registry)
        self.latency = Histogram(
            "citewise_http_request_duration_seconds", "HTTP request latency by route",
            ["method", "route"], registry=self.registry,
            buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
        )
        self.asks = Counter("citewise_asks", "Questions answered or refused, by knowledge base",
                            ["kb", "status"], registry=self.registry)

    def watch(self, caches: Callable[[], Iterable[KBCache]]) -> None:
        """Publish the ``kb_cache`` series of the caches ``caches()`` returns at each scrape."""
        self.registry.register(CacheCollector(caches))


class CacheCollector(Collector):
    """The counts of the process's ``KBCache``s (one per store URL), summed per kind."""

    def __init__(self, caches: Callable[[], Iterable[KBCache]]) -> None:
        self.caches = caches

    def describe(self) -> Iterator[Metric]:
        return self._families([])

    def collect(self) -> Iterator[Metric]:
        return self._families(list(self.caches()))

    def _families(self, caches: list[KBCache]) -> Iterator[Metric]:
        sums = {kind: [0, 0, 0, 0, 0] for kind in KINDS}
        for cache in caches:
            for st in cache.stats():
                for i, value in enumerate((st.hits, st.misses, st.evictions, st.entries, st.bytes)):
                    sums[st.kind][i] += value
        what = [("hits", "Searches served from a cached index", CounterMetricFamily),
                ("misses", "Indexes built from the store (first use or a new version)",
                 CounterMetricFamily),
                ("evictions", "Indexes pushed out by the byte budget", CounterMetricFamily),
                ("entries", "Indexes held", GaugeMetricFamily),
                ("bytes", "Bytes held", GaugeMetricFamily)]
        for i, (name, doc, family) in enumerate(what):
            metric = family(f"citewise_kb_cache_{name}", f"{doc}, by kind (dense, keyword)",
                            labels=["kind"])
            for kind in KINDS:
                metric.add_metric([kind], sums[kind][i])
            yield metric
        budget = GaugeMetricFamily("citewise_kb_cache_budget_bytes",
                                   "The byte budget of the caches of knowledge bases")
        budget.add_metric([], sum(c.limit_bytes for c in caches))
        yield budget


class HttpLayer:
    """Times every request and counts it by route template."""

    def __init__(self, app: Any, metrics: Metrics) -> None:
        self.app, self.metrics = app, metrics

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = [500]

        async def send_wrapper(message: dict) -> None:
            if message["type"] == "http.response.start":
                status[0] = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, send_wrapper)
        finally:
            route = getattr(scope.get("route"), "path", "unmatched")
            self.metrics.requests.labels(scope["method"], route, str(status[0])).inc()
            self.metrics.latency.labels(scope["method"], route).observe(time.perf_counter() - started)
