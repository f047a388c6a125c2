"""Load on the live HTTP service: many concurrent clients across many knowledge bases.

    python -m benchmarks.load [--clients 50] [--kbs 20] [--seconds 60] [--docs-per-kb 12]
                              [--embedder local:all-MiniLM-L6-v2] [--workdir .bench/load]

Starts ``citewise serve`` on a free port over a fresh SQLite store, creates one tenant per
knowledge base (each with its own key), and uploads to each knowledge base its own slice of
BEIR SciFact abstracts (no abstract is in two knowledge bases). Then ``--clients`` clients ask
for ``--seconds``: each request picks a random knowledge base and one of its questions: a SciFact
test claim whose evidence is in that knowledge base, or a claim whose evidence is in *another*
knowledge base (which would be cited if the walls leaked). Every response is checked: any
non-200 is an error, and any citation or context chunk whose document is not in the knowledge
base asked is a leak. Prints one table: requests, errors, leaks, answered and refused shares,
requests per second, p50/p90/p99 latency. The extractive generator answers (no LLM).

The clients run in this process (asyncio + httpx) on the same machine as the server, so they
take some of its CPU; numbers on a shared machine are noisy.

2026-11-30, default settings, nice 10, the 2 cores shared with other jobs (load average in
the column), before = main at 5f4f600, whose questions embed their context's sentences:

  run                                   load avg  setup s  requests  req/s  p50 / p90 / p99 s
  before, fresh store                   4-7        145.4        99    0.6   59 / 86 / 121
  before, same store again              10-12      (reused)     64    0.3   110 / 163 / 173
  after (sentence vectors stored)       15-18      not finished: 4 of 20 knowledge bases set up
                                                   in 19 min, the jobs at nice 10 starved

Run both again on a quieter machine: ``python -m benchmarks.load`` on each branch, or reuse
main's store with ``citewise kb backfill`` on each knowledge base. The lead's earlier, quieter
run measured 2.8 req/s, p50 17 s before.

Sentence vectors move the ~1.4 s of CPU a cold question spent embedding its context's
sentences to ingest (``benchmarks/sentence_vectors.py``: a cold question 11 s to 0.28 s on the
same busy machine).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import secrets
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx

from benchmarks.benchcache import shared_data

ROOT = Path(__file__).resolve().parent.parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def partition(data: Path, kbs: int, docs_per_kb: int, rng: random.Random):
    """Each knowledge base: its documents and the test claims whose evidence it holds."""
    corpus = {}
    with (data / "corpus.jsonl").open() as f:
        for line in f:
            row = json.loads(line)
            corpus[row["_id"]] = row
    claims = {}
    with (data / "queries.jsonl").open() as f:
        for line in f:
            row = json.loads(line)
            claims[row["_id"]] = row["text"]
    evidence = defaultdict(set)
    for line in (data / "qrels" / "test.tsv").read_text().splitlines()[1:]:
        qid, doc, _ = line.split("\t")
        evidence[qid].add(doc)
    queries = sorted(evidence, key=int)
    rng.shuffle(queries)
    docs: list[set[str]] = [set() for _ in range(kbs)]
    questions: list[list[str]] = [[] for _ in range(kbs)]
    taken: set[str] = set()
    for i, qid in enumerate(queries):
        kb = i % kbs
        need = evidence[qid] - taken
        if evidence[qid] & taken - docs[kb] or len(docs[kb]) + len(need) > docs_per_kb:
            continue
        docs[kb] |= need
        taken |= need
        questions[kb].append(claims[qid])
    spare = [d for d in sorted(corpus) if d not in taken]
    rng.shuffle(spare)
    for kb in range(kbs):
        while len(docs[kb]) < docs_per_kb:
            docs[kb].add(spare.pop())
    return corpus, docs, questions


def start_server(db: Path, port: int, admin: str, embedder: str) -> subprocess.Popen:
    env = {**os.environ, "CITEWISE_ADMIN_KEY": admin, "CITEWISE_EMBEDDER": embedder,
           "PYTHONPATH": str(ROOT)}
    return subprocess.Popen(
        [sys.executable, "-m", "citewise", "--db", str(db), "serve", "--port", str(port),
         "--log-level", "warning"],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )


def wait_ready(base: str, proc: subprocess.Popen) -> None:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            sys.exit(f"server exited: {proc.stderr.read() if proc.stderr else ''}")
        try:
            if httpx.get(f"{base}/readyz", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            time.sleep(0.3)
    sys.exit("server did not become ready")


def setup(base: str, admin: str, corpus: dict, docs: list[set[str]]) -> list[str]:
    """One tenant, key and knowledge base per slice (a few at once); returns the keys."""
    headers = {"Authorization": f"Bearer {admin}"}

    def one(i: int) -> str:
        with httpx.Client(base_url=base, timeout=1200) as client:
            r = client.post("/v1/admin/tenants", json={"name": f"tenant{i:02d}"}, headers=headers)
            r.raise_for_status()
            r = client.post(f"/v1/admin/tenants/tenant{i:02d}/keys",
                            json={"rate_per_minute": 1_000_000}, headers=headers)
            r.raise_for_status()
            key = {"Authorization": f"Bearer {r.json()['key']}"}
            client.post("/v1/kbs", json={"name": "kb"}, headers=key).raise_for_status()
            files = [("files", (f"{d}.md", f"# {corpus[d]['title']}\n\n{corpus[d]['text']}\n".encode()))
                     for d in sorted(docs[i])]
            r = client.post("/v1/kbs/kb/documents", files=files, headers=key)
            r.raise_for_status()
            bad = [f for f in r.json()["files"] if f["status"] == "rejected"]
            if bad:
                sys.exit(f"upload rejected: {bad[:3]}")
            print(f"  kb {i + 1}/{len(docs)}: {len(docs[i])} abstracts", file=sys.stderr, flush=True)
            return key["Authorization"]

    with ThreadPoolExecutor(4) as pool:
        return list(pool.map(one, range(len(docs))))


async def load(base: str, keys: list[str], docs: list[set[str]], questions: list[list[str]],
               clients: int, seconds: float, rng: random.Random) -> dict:
    pool = [(kb, q, own) for kb in range(len(keys)) for q in questions[kb] for own in (True,)]
    foreign = [(kb, q) for kb in range(len(keys)) for other in range(len(keys)) if other != kb
               for q in questions[other][:2]]
    latencies: list[float] = []
    outcome: dict[str, int] = defaultdict(int)
    leaks: list[str] = []
    stop = time.monotonic() + seconds
    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)

    async def client(http: httpx.AsyncClient, seed: int) -> None:
        local = random.Random(seed)
        while time.monotonic() < stop:
            if local.random() < 0.7:
                kb, question, _ = local.choice(pool)
            else:
                kb, question = local.choice(foreign)
            t = time.perf_counter()
            try:
                r = await http.post("/v1/kbs/kb/ask", json={"question": question},
                                    headers={"Authorization": keys[kb]})
            except httpx.HTTPError as e:
                outcome[f"error {type(e).__name__}"] += 1
                continue
            latencies.append(time.perf_counter() - t)
            if r.status_code != 200:
                outcome[f"error {r.status_code}"] += 1
                continue
            data = r.json()
            outcome[data["status"]] += 1
            cited = {c["doc_id"] for c in data["citations"]} | {c["doc_id"] for c in data["chunks"]}
            stray = {d.removesuffix(".md") for d in cited} - docs[kb]
            if stray:
                leaks.append(f"kb {kb}: {sorted(stray)[:3]}")

    async with httpx.AsyncClient(base_url=base, timeout=300, limits=limits) as http:
        started = time.monotonic()
        await asyncio.gather(*(client(http, rng.randrange(2**32)) for _ in range(clients)))
        elapsed = time.monotonic() - started
    return {"latencies": latencies, "outcome": dict(outcome), "leaks": leaks, "elapsed": elapsed}


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(p / 100 * len(ordered)) - 1))]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--clients", type=int, default=50)
    ap.add_argument("--kbs", type=int, default=20)
    ap.add_argument("--seconds", type=float, default=60)
    ap.add_argument("--docs-per-kb", type=int, default=12)
    ap.add_argument("--embedder", default="local:all-MiniLM-L6-v2")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--workdir", help="Keep the store and keys here, and reuse them when the "
                    "same settings run again (e.g. .bench/load); default: a temp folder")
    args = ap.parse_args()
    rng = random.Random(args.seed)
    corpus, docs, questions = partition(shared_data("scifact"), args.kbs, args.docs_per_kb, rng)
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    params = {"kbs": args.kbs, "docs_per_kb": args.docs_per_kb, "seed": args.seed,
              "embedder": args.embedder}
    with tempfile.TemporaryDirectory(prefix="citewise-load-") as tmp:
        work = Path(args.workdir or tmp)
        work.mkdir(parents=True, exist_ok=True)
        saved = work / "keys.json"
        reuse = saved.exists() and json.loads(saved.read_text())["params"] == params
        if not reuse:
            for old in work.glob("load.db*"):
                old.unlink()
        admin = json.loads(saved.read_text())["admin"] if reuse else secrets.token_urlsafe(32)
        proc = start_server(work / "load.db", port, admin, args.embedder)
        try:
            wait_ready(base, proc)
            t = time.perf_counter()
            if reuse:
                keys = json.loads(saved.read_text())["keys"]
                print(f"reusing the {args.kbs} knowledge bases in {work}", file=sys.stderr)
            else:
                print(f"setting up {args.kbs} knowledge bases ({args.embedder})...", file=sys.stderr)
                keys = setup(base, admin, corpus, docs)
                saved.write_text(json.dumps({"params": params, "admin": admin, "keys": keys}))
            setup_s = time.perf_counter() - t
            asyncio.run(load(base, keys, docs, questions, 4, 3, rng))  # warm caches
            result = asyncio.run(load(base, keys, docs, questions, args.clients, args.seconds, rng))
        finally:
            proc.terminate()
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
    lat = result["latencies"]
    out = result["outcome"]
    errors = sum(v for k, v in out.items() if k.startswith("error"))
    answered, refused = out.get("answered", 0), out.get("refused", 0)
    rows = [
        ("clients / knowledge bases", f"{args.clients} / {args.kbs} (one tenant each)"),
        ("documents per knowledge base", f"{args.docs_per_kb} SciFact abstracts"),
        ("questions per knowledge base", f"{min(map(len, questions))}-{max(map(len, questions))} own "
                                         "+ claims of other knowledge bases (30%)"),
        ("embedder / generator", f"{args.embedder} / extractive"),
        ("setup (create + upload + embed)", f"{setup_s:.1f} s" + (" (reused)" if reuse else "")),
        ("duration", f"{result['elapsed']:.1f} s"),
        ("requests", f"{len(lat)}"),
        ("errors", f"{errors}" + (f" {out}" if errors else "")),
        ("answers citing another knowledge base", f"{len(result['leaks'])}"),
        ("answered / refused", f"{answered} / {refused}"),
        ("requests per second", f"{len(lat) / result['elapsed']:.1f}"),
        ("latency p50 / p90 / p99", " / ".join(f"{percentile(lat, p) * 1000:.0f} ms" for p in (50, 90, 99))),
        ("latency mean / max", f"{statistics.mean(lat) * 1000:.0f} ms / {max(lat) * 1000:.0f} ms"),
    ]
    width = max(len(k) for k, _ in rows)
    print(f"{'measure':<{width}} | value")
    print(f"{'-' * width}-|{'-' * 40}")
    for k, v in rows:
        print(f"{k:<{width}} | {v}")
    for leak in result["leaks"][:5]:
        print("LEAK", leak)
    sys.exit(1 if errors or result["leaks"] else 0)


if __name__ == "__main__":
    main()
