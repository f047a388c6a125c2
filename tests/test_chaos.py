"""Chaos (#28): two ``citewise serve`` processes on one MariaDB database under a bounded mixed
load (asks, multi-file uploads as jobs, URL ingests of normal, slow and dripping pages, three
tenants) while, at random moments, a server is SIGKILLed (the one running jobs when the test
can tell) and started again on its port, and every connection the servers hold to the
database is dropped with ``KILL CONNECTION`` from the test's own connection. Clients that
find a server down retry on the other; 429 and 503 are answers a caller may get, a 500 never.
Afterwards every job is ``done`` with each file's result, and each document is stored once
and whole: one row, its chunks numbered 0..n-1 once each, each with a vector of the right size
and its row of sentence vectors. A job used to fail when a drop hit its write (``jobs.py``:
now it goes on from its first file without a result)."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pymysql
import pytest

from citewise.stores import open_store
from citewise.stores.urls import ServerURL
from citewise.testing.sql import rows as sql
from tests.api_fixtures import ADMIN_KEY, COVERED, kb_with_sample, sample_files, tenant
from tests.live import free_port
from tests.web_site import drip_server, web_site

pytestmark = [pytest.mark.big, pytest.mark.server, pytest.mark.timeout(300, method="thread")]

ROOT = Path(__file__).resolve().parent.parent
DIM = 256
LOAD_S = 40.0  # the mixed load; the kills and drops fall within it
KILLS = DROPS = 4
BURST = 3  # a drop kills the servers' connections, then the new ones, three times
LEASE_S = 1.5
PAGE_DEADLINE_S = 4.0
SETTLE_S = 90.0  # for every job to end once the load stops
TENANTS = ("acme", "globex", "initech")
PAGES = 6  # normal pages on the local site
QUESTIONS = [COVERED, "what helps with cravings after quitting smoking",
             "heron reeds pond paragraph", "bupropion seizures risk"]
# a 200 page whose last bytes come a few at a time (done well within the deadline), and one
# whose headers drip a byte a second (cut off at the deadline)
SLOW_BODY = ("<html><head><title>Slow heron</title></head><body><h1>Slow heron</h1>"
             + "".join(f"<p>The slow heron stands in the reeds, paragraph {i}.</p>" for i in range(8))
             + "</body></html>").encode()
SLOW_HEAD = (b"HTTP/1.1 200 OK\r\nContent-Type: text/html; charset=utf-8\r\nConnection: close\r\n"
             b"Content-Length: " + str(len(SLOW_BODY)).encode() + b"\r\n\r\n")
DRIP = b"HTTP/1.1 200 OK\r\nX-Padding: " + b"a" * 60
OK = {200, 202, 422, 429, 503}  # 422: a dripping page cut off at its deadline, nothing stored


def upload_text(name: str) -> bytes:
    """A file's content, a function of its name: an upload sent twice reads ``unchanged``."""
    body = "\n\n".join(f"## Part {p}\n\nFile {name} part {p}: the heron waits by the reeds of "
                       f"the pond, {'still ' * (p % 5)}water." for p in range(6))
    return f"# {name}\n\n{body}\n".encode()


@dataclass
class Server:
    """``citewise serve`` on one port, killed and started again on it."""

    url: str
    folder: Path
    port: int = field(default_factory=free_port)
    hosts: str = ""  # CITEWISE_WEB_HOSTS
    process: subprocess.Popen[bytes] | None = None
    starts: int = 0

    def start(self, timeout: float = 60) -> None:
        env = {**os.environ, "PYTHONPATH": str(ROOT), "CITEWISE_ADMIN_KEY": ADMIN_KEY,
               "CITEWISE_EMBEDDER": f"hashing:{DIM}", "CITEWISE_COMPUTE_SLOTS": "1",
               "CITEWISE_JOB_LEASE_S": str(LEASE_S), "CITEWISE_WEB_HOSTS": self.hosts,
               "CITEWISE_WEB_TIMEOUT_S": str(PAGE_DEADLINE_S), "CITEWISE_WEB_DELAY_S": "0",
               "CITEWISE_KEY_CACHE_S": "5", "COLUMNS": "240"}  # a log line a line
        env.pop("CITEWISE_DB", None)
        for _ in range(3):  # a start that failed (its port not free yet, say) is tried again
            self.starts += 1
            with (self.folder / f"serve-{self.port}.log").open("a") as log:
                self.process = subprocess.Popen(
                    [sys.executable, "-m", "citewise", "--db", self.url, "serve", "--port",
                     str(self.port), "--log-level", "warning"],
                    cwd=self.folder, env=env, stdout=log, stderr=subprocess.STDOUT)
            deadline = time.monotonic() + timeout
            while self.process.poll() is None and time.monotonic() < deadline:
                try:
                    if httpx.get(f"{self.base}/readyz", timeout=2).status_code == 200:
                        return
                except httpx.TransportError:
                    pass
                time.sleep(0.2)
            self.kill()
        raise RuntimeError(f"citewise serve on {self.port} did not start: {self.log()[-3000:]}")

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGKILL)
        if self.process is not None:
            self.process.wait(30)

    def log(self) -> str:
        path = self.folder / f"serve-{self.port}.log"
        return path.read_text(errors="replace") if path.exists() else ""


@dataclass
class Load:
    """What the clients and the chaos did, and every answer seen."""

    servers: list[Server]
    tenants: dict[str, dict[str, str]]
    stop: threading.Event = field(default_factory=threading.Event)
    lock: threading.Lock = field(default_factory=threading.Lock)
    seen: Counter[tuple[str, int | str]] = field(default_factory=Counter)
    failures: list[str] = field(default_factory=list)
    posted: dict[str, int] = field(default_factory=dict)  # job id -> the server it was posted to
    kills: int = 0
    running_killed: int = 0  # kills of a server running a job
    running_dropped: int = 0  # drops while a job ran
    dropped: list[int] = field(default_factory=list)  # connections killed, per drop

    def note(self, kind: str, status: int | str, r: httpx.Response | None = None) -> None:
        with self.lock:
            self.seen[(kind, status)] += 1
            if isinstance(status, int) and status not in OK:
                self.failures.append(f"{kind} {status}: {r.text[:300] if r is not None else ''}")

    def call(self, kind: str, rng: random.Random, method: str, path: str, who: str,
             **kw: Any) -> tuple[httpx.Response, int] | None:
        """The request on a random server, again on the other while a server is down;
        the answer and the server that gave it, or None if no server answered."""
        first = rng.randrange(len(self.servers))
        for attempt in range(8):
            n = (first + attempt) % len(self.servers)
            try:
                r = httpx.request(method, self.servers[n].base + path, headers=self.tenants[who],
                                  timeout=60, **kw)
            except httpx.TransportError as e:
                self.note(kind, type(e).__name__)
                time.sleep(0.25 if attempt % 2 else 0)
                continue
            self.note(kind, r.status_code, r)
            return r, n
        return None


def asker(load: Load, seed: int) -> None:
    rng = random.Random(seed)
    while not load.stop.is_set():
        load.call("ask", rng, "POST", "/v1/kbs/docs/ask", rng.choice(TENANTS),
                  json={"question": rng.choice(QUESTIONS)})
        load.stop.wait(rng.uniform(0.1, 0.4))


def uploader(load: Load, seed: int) -> None:
    rng = random.Random(seed)
    sent = 0
    while not load.stop.is_set():
        sent += 1
        names = [f"u{seed}-{sent}-{i}.md" for i in range(rng.randint(2, 4))]
        if sent > 3 and rng.random() < 0.2:  # an upload sent again: its files read unchanged
            names = [f"u{seed}-{sent - 2}-{i}.md" for i in range(2)]
        who = rng.choice(TENANTS)
        got = load.call("upload", rng, "POST", "/v1/kbs/docs/documents", who,
                        files=[("files", (n, upload_text(n))) for n in names])
        if got is not None and got[0].status_code == 202:
            job = got[0].json()["id"]
            with load.lock:
                load.posted[job] = got[1]
            for _ in range(10):  # polled for a while, on either server
                if load.stop.wait(0.3):
                    break
                polled = load.call("job", rng, "GET", f"/v1/jobs/{job}", who)
                if polled is not None and polled[0].status_code == 200 \
                        and polled[0].json()["state"] in ("done", "failed"):
                    break
        load.stop.wait(rng.uniform(0.2, 0.6))


def fetcher(load: Load, seed: int, urls: list[str]) -> None:
    rng = random.Random(seed)
    while not load.stop.is_set():
        load.call("urls", rng, "POST", "/v1/kbs/docs/urls", rng.choice(TENANTS),
                  json={"urls": [rng.choice(urls)]})
        load.stop.wait(rng.uniform(0.2, 0.8))


@contextmanager
def admin_connection(url: str) -> Iterator[Any]:
    """The test's own connection to the MariaDB server (no database: not among the servers')."""
    t = ServerURL.parse(url)
    conn = pymysql.connect(host=t.host, port=t.port or 3306, user=t.user or "root",
                           password=t.password, autocommit=True, connect_timeout=5)
    try:
        yield conn
    finally:
        conn.close()


def drop_connections(admin: Any, database: str) -> int:
    """``KILL CONNECTION`` of every connection to ``database``: how many were killed."""
    with admin.cursor() as cur:
        cur.execute("SELECT id FROM information_schema.processlist WHERE db = %s "
                    "AND id <> CONNECTION_ID()", (database,))
        killed = 0
        for (conn_id,) in cur.fetchall():
            try:
                cur.execute(f"KILL CONNECTION {int(conn_id)}")
                killed += 1
            except pymysql.MySQLError:  # gone meanwhile
                pass
    return killed


def job_holder(load: Load, admin: Any, database: str) -> int | None:
    """The server running jobs now, as far as the test can tell: each runner is the server
    most of its jobs were posted to."""
    with admin.cursor() as cur:
        cur.execute(f"SELECT public_id, runner, state FROM {database}.jobs WHERE runner IS NOT NULL")
        rows = cur.fetchall()
    with load.lock:
        posted = dict(load.posted)
    votes: dict[str, Counter[int]] = {}
    for job, runner, _ in rows:
        if job in posted:
            votes.setdefault(runner, Counter())[posted[job]] += 1
    running = Counter(votes[runner].most_common(1)[0][0] for _, runner, state in rows
                      if state == "running" and runner in votes)
    return running.most_common(1)[0][0] if running else None


def chaos(load: Load, admin: Any, database: str, rng: random.Random) -> None:
    events = ["kill"] * KILLS + ["drop"] * DROPS
    rng.shuffle(events)
    gap = (LOAD_S - 6) / len(events)
    started = time.monotonic()
    for n, event in enumerate(events):
        if load.stop.wait(max(0.0, started + 3 + n * gap + rng.uniform(0, gap / 2)
                              - time.monotonic())):
            return
        holder, until = None, time.monotonic() + 2
        while holder is None and time.monotonic() < until:  # a moment a job runs, if one comes
            if (holder := job_holder(load, admin, database)) is None:
                time.sleep(0.1)
        if event == "drop":
            load.running_dropped += holder is not None
            for _ in range(BURST):  # and the new ones too, once the servers connect again
                load.dropped.append(drop_connections(admin, database))
                time.sleep(rng.uniform(0.1, 0.4))
            continue
        victim = load.servers[holder if holder is not None else load.kills % 2]
        victim.kill()
        load.kills += 1
        load.running_killed += holder is not None
        time.sleep(rng.uniform(0, 1.0))  # down a while: clients go to the other one
        victim.start()


def settle(url: str, timeout: float) -> list[tuple[Any, ...]]:
    """Every job's state once none is queued or running (or the time is up)."""
    store = open_store(url)
    try:
        deadline = time.monotonic() + timeout
        while True:
            jobs = sql(store, "SELECT public_id, state, error FROM jobs ORDER BY id")
            if all(state in ("done", "failed") for _, state, _ in jobs) \
                    or time.monotonic() > deadline:
                return jobs
            time.sleep(0.5)
    finally:
        store.close()


def check_stored(url: str) -> dict[str, int]:
    """Each job's files all with a result and each document stored once and whole; counts."""
    store = open_store(url)
    try:
        files = sql(store, "SELECT j.public_id, j.tenant_id, j.kb_name, f.filename, f.result, "
                    "f.content IS NULL FROM job_files f JOIN jobs j ON j.id = f.job_id")
        kbs = {(int(t), name): int(kb_id) for kb_id, t, name in
               sql(store, "SELECT id, tenant_id, name FROM kbs")}
        uploaded: dict[int, set[str]] = {}
        added: dict[tuple[int, str], int] = {}  # (kb, doc) -> chunks, when a job added it
        for job, tenant_id, kb, filename, result, dropped in files:
            assert result is not None and dropped, f"job {job}: {filename} has no result"
            got = json.loads(result)
            assert got["status"] in ("added", "unchanged") and got["doc_id"] == filename, got
            kb_id = kbs[(int(tenant_id), kb)]
            uploaded.setdefault(kb_id, set()).add(filename)
            if got["status"] == "added":
                assert (kb_id, filename) not in added, f"{filename} added twice in kb {kb_id}"
                added[(kb_id, filename)] = got["chunks"]
        docs: dict[int, set[str]] = {}
        for kb_id, doc_id, n in sql(store, "SELECT kb_id, doc_id, count(*) FROM documents "
                                    "GROUP BY kb_id, doc_id"):
            assert n == 1, f"{doc_id} stored {n} times in kb {kb_id}"
            docs.setdefault(int(kb_id), set()).add(doc_id)
        samples = set(sample_files())
        for kb_id, ids in docs.items():
            mine = {d for d in ids if d not in samples and not d.startswith("http")}
            assert mine == uploaded.get(kb_id, set()), (
                f"kb {kb_id}: stored but not in a job: {sorted(mine - uploaded.get(kb_id, set()))}; "
                f"in a job but not stored: {sorted(uploaded.get(kb_id, set()) - mine)}")
        # per document: its chunks, their distinct ordinals (0..n-1) and ids, the vectors not
        # of DIM float32s, and the chunks' sentence-vector rows (one each, made at ingest)
        chunks = {(int(kb_id), doc_id): tuple(int(v) for v in values)
                  for kb_id, doc_id, *values in sql(
                      store, "SELECT c.kb_id, c.doc_id, count(*), count(DISTINCT c.ordinal), "
                      "min(c.ordinal), max(c.ordinal), count(DISTINCT c.chunk_id), "
                      "sum(length(c.vector) <> %s), count(s.chunk_key) FROM chunks c "
                      "LEFT JOIN chunk_sentences s ON s.kb_id = c.kb_id "
                      "AND s.chunk_key = c.FTS_DOC_ID GROUP BY c.kb_id, c.doc_id", (DIM * 4,))}
        every = {(kb_id, d) for kb_id, ids in docs.items() for d in ids}
        assert set(chunks) == every, f"documents without chunks: {sorted(every - set(chunks))}, " \
            f"chunks without a document: {sorted(set(chunks) - every)}"
        for doc, (n, ordinals, low, high, ids, bad, sentences) in chunks.items():
            assert (ordinals, low, high, ids, bad, sentences) == (n, 0, n - 1, n, 0, n), \
                (doc, chunks[doc])
            if doc in added:
                assert added[doc] == n, f"{doc}: {n} chunks stored, its job added {added[doc]}"
        [(orphans,)] = sql(store, "SELECT count(*) FROM chunk_sentences s LEFT JOIN chunks c "
                           "ON c.kb_id = s.kb_id AND c.FTS_DOC_ID = s.chunk_key "
                           "WHERE c.FTS_DOC_ID IS NULL")
        assert orphans == 0, f"{orphans} sentence rows of no chunk"
        urls = sum(1 for ids in docs.values() for d in ids if d.startswith("http"))
        return {"documents": len(every), "uploaded": sum(map(len, uploaded.values())),
                "pages": urls, "slow pages": sum(1 for _, d in every if d.endswith("/slow.html")),
                "chunks": sum(c[0] for c in chunks.values())}
    finally:
        store.close()


def test_chaos_kills_and_drops_under_mixed_load(mysql_database: Callable[[], Any],
                                                tmp_path: Path) -> None:
    rng = random.Random(2828)
    started = time.monotonic()
    with ExitStack() as stack:
        url = stack.enter_context(mysql_database())
        database = ServerURL.parse(url).database
        site = stack.enter_context(web_site())
        for i in range(PAGES):
            site.page(f"/p{i}.html", f"<html><head><title>Page {i}</title></head><body><h1>Pond "
                      f"page {i}</h1><p>The heron waits by the reeds, page {i} of the pond "
                      f"survey.</p><p>Water level {i * 7} cm.</p></body></html>")
        slow = stack.enter_context(drip_server(SLOW_BODY[-6:], every=0.2,
                                               head=SLOW_HEAD + SLOW_BODY[:-6]))
        drip = stack.enter_context(drip_server(DRIP, every=1.0))
        hosts = ",".join(f"127.0.0.1:{p}" for p in (int(site.base.rsplit(":", 1)[1]), slow.port,
                                                     drip.port))
        servers = [Server(url, tmp_path, hosts=hosts) for _ in range(2)]
        for server in servers:
            stack.callback(server.kill)
            server.start()
        with httpx.Client(base_url=servers[0].base, timeout=60) as admin_client:
            keys = {name: tenant(admin_client, name, rate_per_minute=100_000)  # type: ignore[arg-type]
                    for name in TENANTS}
            for key in keys.values():
                kb_with_sample(admin_client, key)  # type: ignore[arg-type]
        load = Load(servers, {name: key.headers for name, key in keys.items()})
        urls = ([f"{site.base}/p{i}.html" for i in range(PAGES)]
                + [f"http://127.0.0.1:{slow.port}/slow.html"] * 2
                + [f"http://127.0.0.1:{drip.port}/drip.html"])
        threads = ([threading.Thread(target=asker, args=(load, s)) for s in (1, 2)]
                   + [threading.Thread(target=uploader, args=(load, s)) for s in (3, 4)]
                   + [threading.Thread(target=fetcher, args=(load, s, urls)) for s in (5, 6)])
        admin = stack.enter_context(admin_connection(url))
        for thread in threads:
            thread.start()
        try:
            chaos(load, admin, database, rng)
            load.stop.wait(max(0.0, started + LOAD_S - time.monotonic()))
        finally:
            load.stop.set()
            for thread in threads:
                thread.join(PAGE_DEADLINE_S * 3 + 60)
        loaded = time.monotonic()
        jobs = settle(url, SETTLE_S)
        settled = time.monotonic()
        logs = "\n".join(s.log() for s in servers)
        retried = logs.count("; going on from")
        summary = {kind: dict(sorted(((s, n) for (k, s), n in load.seen.items() if k == kind),
                                     key=str)) for kind in ("ask", "upload", "job", "urls")}
        print(f"\nchaos: load {loaded - started:.0f} s, jobs settled in {settled - loaded:.1f} s; "
              f"{load.kills} kills ({load.running_killed} running jobs; "
              f"{[s.starts for s in servers]} starts), "
              f"{DROPS} drops ({load.running_dropped} running jobs) killing {load.dropped} "
              f"connections, {retried} jobs going on after a store error; "
              f"{len(jobs)} jobs; answers {summary}")
        assert not load.failures, f"{load.failures[:10]}\n{logs[-6000:]}"
        assert all(not t.is_alive() for t in threads), "a client never came back"
        unfinished = [job for job in jobs if job[1] != "done"]
        assert not unfinished, f"{len(unfinished)} jobs not done: {unfinished[:5]}\n{logs[-6000:]}"
        stored = check_stored(url)
        print(f"chaos: stored {stored}")
    assert load.kills == KILLS and len(load.dropped) == BURST * DROPS
    assert sum(n for (k, s), n in load.seen.items() if k == "upload" and s == 202) >= 10
    assert sum(n for (k, s), n in load.seen.items() if k == "ask" and s == 200) >= 20
