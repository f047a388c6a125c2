"""A tenant that floods ``POST /v1/kbs/{kb}/urls`` with pages that drip a byte at a time costs
only its own budget: its fetches are counted per tenant (more at once are 429 at the door),
run in a fetch pool of their own, each page ends at its deadline, and another tenant's asks
and ``/healthz`` are answered as before. A real uvicorn server in a thread, as in production:
the worker thread pool is what the flood used to fill (70 requests held 64 threads for as long
as the pages dripped, and everyone else's requests waited for one)."""

from __future__ import annotations

import threading
import time
from collections import Counter
from pathlib import Path

import httpx
import pytest

from tests.api_fixtures import COVERED, kb_with_sample, make_app, settings_for, tenant
from tests.live import serve
from tests.web_site import drip_server

pytestmark = pytest.mark.heavy  # servers, processes, deadlines or megabytes: make test, not make unit

FLOOD = 70
DRIP = b"HTTP/1.1 200 OK\r\nX-Padding: " + b"a" * 60  # a byte every 2 s: two minutes of it
PAGE_DEADLINE_S = 4.0


def timed(call: object) -> float:
    started = time.monotonic()
    try:
        r = call()  # type: ignore[operator]
    except httpx.TimeoutException:
        return float("inf")
    assert r.status_code == 200, r.text
    return time.monotonic() - started


@pytest.mark.timeout(180, method="thread")
def test_a_tenant_dripping_pages_at_the_service_delays_no_one_else(tmp_path: Path) -> None:
    statuses: Counter[int | str] = Counter()
    asks: list[float] = []
    health: list[float] = []
    with drip_server(DRIP, every=2.0) as drip:
        url = f"http://127.0.0.1:{drip.port}/page.html"
        settings = settings_for(tmp_path / "f.db", web_hosts=[f"127.0.0.1:{drip.port}"],
                                web_delay_s=0, web_timeout_s=PAGE_DEADLINE_S)
        with serve(make_app(settings)) as base, httpx.Client(base_url=base, timeout=60) as client:
            flood = tenant(client, "flood", rate_per_minute=10_000)  # type: ignore[arg-type]
            calm = tenant(client, "calm")  # type: ignore[arg-type]
            assert client.post("/v1/kbs", json={"name": "kb"}, headers=flood.headers).status_code == 201
            kb_with_sample(client, calm)  # type: ignore[arg-type]

            def fetch() -> None:
                try:
                    r = client.post("/v1/kbs/kb/urls", json={"urls": [url]}, headers=flood.headers)
                except httpx.HTTPError as e:  # no answer in time (or the test ended first)
                    statuses[type(e).__name__] += 1
                    return
                statuses[r.status_code] += 1
                if r.status_code == 429:
                    assert r.headers["Retry-After"].isdigit()

            threads = [threading.Thread(target=fetch, daemon=True) for _ in range(FLOOD)]
            for thread in threads:
                thread.start()
            deadline = time.monotonic() + 10
            while not drip.connections and time.monotonic() < deadline:
                time.sleep(0.05)  # the flood has reached the dripping site
            for _ in range(6):  # for about as long as a page may take
                asks.append(timed(lambda: client.post(
                    "/v1/kbs/docs/ask", json={"question": COVERED}, headers=calm.headers,
                    timeout=5)))
                health.append(timed(lambda: client.get("/healthz", timeout=5)))
                if float("inf") in asks + health:
                    break
                time.sleep(0.5)
            most = drip.most
            deadline = time.monotonic() + 3 * PAGE_DEADLINE_S
            for thread in threads:
                thread.join(max(0.0, deadline - time.monotonic()))
    assert max(asks) < 2.0 and max(health) < 1.0, f"asks took {asks} s, /healthz {health} s"
    assert most <= 2, f"{most} of one tenant's fetches ran at once"
    assert statuses[429] >= FLOOD - 4 and set(statuses) <= {422, 429}, statuses
