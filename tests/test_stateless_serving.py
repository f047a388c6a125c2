"""Stateless serving: two ``citewise serve`` processes on one MariaDB database answer the same.

Server A takes every write (tenants, a knowledge base, uploads, a replace, a delete); server B
only reads. B must see A's writes on its next request, and B's cached dense matrix (warmed
before the writes) must be dropped because the knowledge base's version moved: a dense search
with k above the chunk count returns every stored chunk, so a stale cache shows up as a
deleted chunk or a missing new one. The same holds for B's in-memory keyword index: warmed
before the writes, it must be rebuilt for the new version, so a word only the new upload
holds is found by keyword through B, and a deleted document's words are not.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import httpx
import pytest

from tests.api_fixtures import ADMIN, ADMIN_KEY, COVERED
from tests.helpers import SAMPLE
from tests.live import server_process

ROOT = Path(__file__).resolve().parent.parent
FILES = ["bupropion.md", "varenicline.md", "weight-gain-after-quitting.md"]
DENSE_K = 50  # a knowledge base's default dense candidates: every chunk while fewer
NEW_VARENICLINE = (
    "# Varenicline\n\n## Revised guidance\n\n"
    "Varenicline guidance was revised: the zephyrine titration protocol replaces the earlier "
    "schedule, and prescribers follow the zephyrine protocol for every new course.\n"
)
NEW_VARENICLINE_CHUNK = NEW_VARENICLINE.split("\n\n")[-1].strip()
START_TIMEOUT = 60.0
REQUEST_TIMEOUT = 60.0


@contextmanager
def citewise_serve(db: str, workdir: Path) -> Iterator[httpx.Client]:
    """``citewise --db DB serve`` in a process of its own on a free loopback port."""
    env = {**os.environ, "CITEWISE_ADMIN_KEY": ADMIN_KEY, "CITEWISE_EMBEDDER": "hashing:256",
           "CITEWISE_COMPUTE_SLOTS": "1", "PYTHONPATH": str(ROOT)}
    env.pop("CITEWISE_DB", None)
    command = [sys.executable, "-m", "citewise", "--db", db, "serve", "--port", "{port}",
               "--log-level", "warning"]
    with server_process(command, workdir, env, "citewise serve", START_TIMEOUT,
                        REQUEST_TIMEOUT) as client:
        yield client


@pytest.fixture(name="pair")
def pair_fixture(mysql_database: Callable[[], object], tmp_path: Path
                 ) -> Iterator[tuple[httpx.Client, httpx.Client]]:
    with mysql_database() as url, ExitStack() as stack:
        a = stack.enter_context(citewise_serve(url, tmp_path))
        b = stack.enter_context(citewise_serve(url, tmp_path))
        yield a, b


def new_tenant(client: httpx.Client, name: str) -> dict[str, str]:
    assert client.post("/v1/admin/tenants", json={"name": name}, headers=ADMIN).status_code == 201
    r = client.post(f"/v1/admin/tenants/{name}/keys", json={}, headers=ADMIN)
    assert r.status_code == 201, r.text
    return {"Authorization": f"Bearer {r.json()['key']}"}


def upload(client: httpx.Client, who: dict[str, str], files: dict[str, bytes]) -> list[dict]:
    r = client.post("/v1/kbs/docs/documents?wait=true", headers=who,
                    files=[("files", (name, data)) for name, data in files.items()])
    assert r.status_code == 200, r.text
    return r.json()["files"]


def every_chunk(client: httpx.Client, who: dict[str, str], query: str) -> list[tuple[str, str]]:
    """Every chunk of the knowledge base, by dense search with k at least the chunk count."""
    total = client.get("/v1/kbs/docs", headers=who).json()["chunks"]
    r = client.post("/v1/kbs/docs/search", headers=who,
                    json={"query": query, "k": DENSE_K, "mode": "dense"})
    assert r.status_code == 200, r.text
    found = [(c["doc_id"], c["text"]) for c in r.json()["chunks"]]
    assert len(found) == total < DENSE_K
    return sorted(found)


def keyword(client: httpx.Client, who: dict[str, str], query: str) -> list[tuple[str, str]]:
    """The BM25-only hits (``mode: bm25``): keyword search alone, no dense list fused in."""
    r = client.post("/v1/kbs/docs/search", headers=who, json={"query": query, "k": 10, "mode": "bm25"})
    assert r.status_code == 200, r.text
    return [(c["doc_id"], c["text"]) for c in r.json()["chunks"]]


def keyword_builds(client: httpx.Client) -> float:
    """How many keyword indexes the server process has built (``/metrics``)."""
    for line in client.get("/metrics", headers=ADMIN).text.splitlines():
        if line.startswith('citewise_kb_cache_misses_total{kind="keyword"}'):
            return float(line.split()[-1])
    raise AssertionError("no keyword cache metric")


def answer(client: httpx.Client, who: dict[str, str], question: str) -> dict:
    r = client.post("/v1/kbs/docs/ask", json={"question": question}, headers=who)
    assert r.status_code == 200, r.text
    data = r.json()
    return {k: data[k] for k in ("status", "answer", "citations", "reason", "related")} | {
        "chunks": [(c["doc_id"], c["chunk_id"], round(c["cosine"], 5)) for c in data["chunks"]]}


def documents(client: httpx.Client, who: dict[str, str]) -> list[tuple[str, str, int]]:
    r = client.get("/v1/kbs/docs/documents", headers=who)
    assert r.status_code == 200, r.text
    return [(d["doc_id"], d["content_hash"], d["chunks"]) for d in r.json()]


def test_two_servers_share_writes_and_invalidate_caches(
        pair: tuple[httpx.Client, httpx.Client]) -> None:
    a, b = pair
    acme = new_tenant(a, "acme")
    assert a.post("/v1/kbs", json={"name": "docs"}, headers=acme).status_code == 201
    stored = upload(a, acme, {name: (SAMPLE / name).read_bytes() for name in FILES})
    assert sorted(f["doc_id"] for f in stored if f["status"] == "added") == sorted(FILES)

    # B reads what A wrote: the same documents, chunks, search results and answer
    assert [d[0] for d in documents(b, acme)] == sorted(FILES)
    assert documents(b, acme) == documents(a, acme)
    before = every_chunk(b, acme, COVERED)  # warms B's dense cache
    assert before == every_chunk(a, acme, COVERED)
    assert {doc for doc, _ in before} == set(FILES)
    asked = answer(b, acme, COVERED)
    assert asked["status"] == "answered" and asked["citations"]
    assert asked == answer(a, acme, COVERED)
    for _ in range(3):  # warm the caches of the worker threads B reuses
        every_chunk(b, acme, "bupropion seizures")
        assert keyword(b, acme, "zephyrine titration protocol") == []  # a word no chunk holds yet
        assert {doc for doc, _ in keyword(b, acme, "bupropion seizures")} >= {"bupropion.md"}
    built = keyword_builds(b)
    assert built >= 1

    # A replaces one document and deletes another; B's next reads reflect both
    assert [f["status"] for f in upload(a, acme, {"varenicline.md": NEW_VARENICLINE.encode()})] \
        == ["replaced"]
    replaced = every_chunk(b, acme, "zephyrine titration protocol")  # B caches this version
    assert {doc for doc, _ in replaced} == set(FILES)
    assert [t for d, t in replaced if d == "varenicline.md"] == [NEW_VARENICLINE_CHUNK]
    assert keyword(b, acme, "zephyrine") == [("varenicline.md", NEW_VARENICLINE_CHUNK)]
    assert keyword_builds(b) == built + 1  # B's index of the old version was not served
    assert a.delete("/v1/kbs/docs/documents/bupropion.md", headers=acme).status_code == 204
    left = sorted(set(FILES) - {"bupropion.md"})
    assert [d[0] for d in documents(b, acme)] == left
    for _ in range(3):
        assert "bupropion.md" not in {doc for doc, _ in keyword(b, acme, "bupropion seizures")}
        assert keyword(b, acme, "zephyrine") == [("varenicline.md", NEW_VARENICLINE_CHUNK)]
        after = every_chunk(b, acme, "zephyrine titration protocol")
        assert {doc for doc, _ in after} == set(left)
        assert all(doc != "bupropion.md" for doc, _ in after)
        assert [text for doc, text in after if doc == "varenicline.md"] == [NEW_VARENICLINE_CHUNK]
        assert not set(after) & {c for c in before if c[0] in ("varenicline.md", "bupropion.md")}
        assert after == every_chunk(a, acme, "zephyrine titration protocol")
    top = b.post("/v1/kbs/docs/search", headers=acme,
                 json={"query": "zephyrine titration protocol", "k": 1, "mode": "hybrid"}).json()
    assert top["chunks"][0]["doc_id"] == "varenicline.md"
    assert answer(b, acme, COVERED) == answer(a, acme, COVERED) != asked

    # a second tenant's key on B sees nothing of acme's
    other = new_tenant(a, "globex")
    assert b.get("/v1/kbs", headers=other).json() == []
    for r in (b.get("/v1/kbs/docs", headers=other), b.get("/v1/kbs/docs/documents", headers=other),
              b.post("/v1/kbs/docs/search", json={"query": COVERED}, headers=other),
              b.post("/v1/kbs/docs/ask", json={"question": COVERED}, headers=other)):
        assert r.status_code == 404, r.text
        assert "zephyrine" not in r.text and "varenicline" not in r.text.lower()
