"""The load benchmark's clients: closed-loop askers (each sends its next question when the last
is answered) and open-loop ones (questions at random times at a set rate, answered or not),
all in one asyncio loop over one pooled httpx client. Every answer is checked: any non-200 is
an error (a 429 is counted as such, by status), and a citation or context chunk whose document
is not in the knowledge base asked is a leak. The fairness profile's flood runs in a process of
its own (``run_fair``).
"""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import random
import resource
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import httpx

from benchmarks.load_setup import Layout

Pick = Callable[[random.Random], tuple[int, str]]


@dataclass
class Tally:
    """What one group of clients saw."""

    latencies: list[float] = field(default_factory=list)
    outcome: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    leaks: list[str] = field(default_factory=list)
    elapsed: float = 0.0
    cpu: float = 0.0  # CPU seconds of the process it ran in, when that was not this one

    @property
    def errors(self) -> int:
        return sum(v for k, v in self.outcome.items() if k.startswith("error"))

    @property
    def requests(self) -> int:
        return sum(self.outcome.values())

    def count(self, name: str) -> int:
        return self.outcome.get(name, 0)


def picker(layout: Layout, kbs: list[int] | None = None, foreign_share: float = 0.3) -> Pick:
    """A random knowledge base of ``kbs`` (default: all) and, 70% of the time, one of its own
    claims; otherwise another knowledge base's claim (which would be cited if the walls leaked)."""
    chosen = kbs if kbs is not None else [k for k in range(len(layout.docs)) if layout.questions[k]]
    others = [k for k in range(len(layout.docs)) if layout.questions[k]]

    def pick(rng: random.Random) -> tuple[int, str]:
        kb = rng.choice(chosen)
        source = kb if rng.random() >= foreign_share else rng.choice(others)
        return kb, rng.choice(layout.questions[source])

    return pick


async def _ask(http: httpx.AsyncClient, keys: list[str], layout: Layout, kb: int, question: str,
               tally: Tally) -> None:
    t = time.perf_counter()
    try:
        r = await http.post("/v1/kbs/kb/ask", json={"question": question},
                            headers={"Authorization": keys[kb]})
    except httpx.HTTPError as e:
        tally.outcome[f"error {type(e).__name__}"] += 1
        return
    tally.latencies.append(time.perf_counter() - t)
    if r.status_code != 200:
        tally.outcome[f"error {r.status_code}"] += 1
        return
    data = r.json()
    tally.outcome[data["status"]] += 1
    cited = {c["doc_id"] for c in data["citations"]} | {c["doc_id"] for c in data["chunks"]}
    stray = cited - layout.ids(kb)
    if stray:
        tally.leaks.append(f"kb {kb}: {sorted(stray)[:3]}")


async def closed(http: httpx.AsyncClient, keys: list[str], layout: Layout, pick: Pick,
                 clients: int, until: float, rng: random.Random, tally: Tally) -> None:
    """``clients`` askers, each asking again as soon as it is answered, until ``until``."""

    async def one(seed: int) -> None:
        local = random.Random(seed)
        while time.monotonic() < until:
            kb, question = pick(local)
            await _ask(http, keys, layout, kb, question, tally)

    await asyncio.gather(*(one(rng.randrange(2**32)) for _ in range(clients)))


async def paced(http: httpx.AsyncClient, keys: list[str], layout: Layout, pick: Pick,
                per_second: float, until: float, rng: random.Random, tally: Tally) -> None:
    """Questions at random (Poisson) times, ``per_second`` on average, each sent whether or not
    the ones before were answered, until ``until``; waits for the last answers."""
    pending: list[asyncio.Task] = []
    while (now := time.monotonic()) < until:
        await asyncio.sleep(min(rng.expovariate(per_second), max(0.0, until - now)))
        if time.monotonic() >= until:
            break
        kb, question = pick(rng)
        pending.append(asyncio.ensure_future(_ask(http, keys, layout, kb, question, tally)))
    await asyncio.gather(*pending)


def client(base: str, connections: int) -> httpx.AsyncClient:
    limits = httpx.Limits(max_connections=connections, max_keepalive_connections=connections)
    return httpx.AsyncClient(base_url=base, timeout=300, limits=limits)


async def run_closed(base: str, keys: list[str], layout: Layout, pick: Pick, clients: int,
                     seconds: float, rng: random.Random) -> Tally:
    tally = Tally()
    async with client(base, clients) as http:
        started = time.monotonic()
        await closed(http, keys, layout, pick, clients, started + seconds, rng, tally)
        tally.elapsed = time.monotonic() - started
    return tally


def _flood(base: str, keys: list[str], layout: Layout, flooder: int, clients: int,
           seconds: float, seed: int, niceness: int, out: Any) -> None:
    """The flood, in a process of its own (``run_fair``) at ``niceness``: what it saw, as
    plain values."""
    os.nice(niceness)
    tally = asyncio.run(run_closed(base, keys, layout, picker(layout, [flooder], 0.0), clients,
                                   seconds, random.Random(seed)))
    me = resource.getrusage(resource.RUSAGE_SELF)
    out.put((tally.latencies, dict(tally.outcome), tally.leaks, tally.elapsed,
             me.ru_utime + me.ru_stime))


def run_fair(base: str, keys: list[str], layout: Layout, flooder: int, flood_clients: int,
             per_second: float, seconds: float, rng: random.Random, niceness: int = 10
             ) -> tuple[Tally, Tally]:
    """The other tenants asking at ``per_second`` in all (open loop) while ``flood_clients``
    closed-loop clients ask as one tenant, ``flooder``, as fast as they are answered (0: no
    flood); what the others saw and what the flood saw. The flood runs in a process of its
    own, so the others' latencies are not its client's work queued in the same event loop,
    at ``niceness``: its client's CPU (another machine's, in earnest) then takes the server's
    cores only when they are idle. A flood at 40 clients sends a few hundred requests a second
    either way."""
    others = [k for k in range(len(keys)) if k != flooder and layout.questions[k]]
    flood = Tally()
    child = None
    if flood_clients:
        ctx = multiprocessing.get_context("spawn")
        out = ctx.Queue()
        child = ctx.Process(target=_flood, args=(base, keys, layout, flooder, flood_clients,
                                                 seconds, rng.randrange(2**32), niceness, out))
        child.start()
        time.sleep(2.0)  # the child's imports: the flood is on before the others start

    async def calm_run() -> Tally:
        calm = Tally()
        async with client(base, 64) as http:
            started = time.monotonic()
            await paced(http, keys, layout, picker(layout, others), per_second,
                        started + seconds - (2.0 if child else 0.0), rng, calm)
            calm.elapsed = time.monotonic() - started
        return calm

    calm = asyncio.run(calm_run())
    if child is not None:
        latencies, outcome, leaks, elapsed, cpu = out.get(timeout=seconds + 120)
        child.join(30)
        flood = Tally(latencies, defaultdict(int, outcome), leaks, elapsed, cpu)
    return calm, flood
