"""The load benchmark's knowledge bases: which SciFact abstracts and test claims each holds,
and two ways to write them.

``over_http`` uploads each slice through the service (tenant, key, knowledge base, upload),
as a customer would: every abstract is chunked and embedded in the server, so 240 abstracts
take minutes. ``direct`` writes the same through the store and ``Engine.ingest`` before the
server starts, with the chunks' and sentences' vectors made once per distinct abstract and kept
in ``.bench/load-vectors-<key>.pkl`` (``CachedVectors``): 2,000 knowledge bases of 5-20
abstracts hold ~25,000 documents but only the ~5,000 abstracts SciFact has, so embedding
each once, and never again on a later run, turns an hour over HTTP into minutes the first
time and seconds after. The vectors are the ones ingest makes (the same function, on the same
chunk texts), so what the server reads is what an upload would have stored.

Document ids are unique per knowledge base (``k0042-4983.md``, or ``4983.md`` where each
abstract is in one knowledge base only), so a citation of any other knowledge base's document
is seen as a leak even when the same abstract is in both.
"""

from __future__ import annotations

import hashlib
import json
import pickle
import random
import sys
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import numpy as np

from benchmarks.benchcache import CACHE
from citewise.answer import sentence_vectors
from citewise.engine import Engine
from citewise.ingest.documents import document
from citewise.ingest.loaders import read_markdown
from citewise.records import Document
from citewise.stores import open_store

RATE = 1_000_000  # requests a minute per key: the benchmark measures compute, not the limiter


@dataclass(frozen=True)
class Layout:
    """Per knowledge base: its documents (id to SciFact abstract id) and its own claims."""

    corpus: dict[str, dict]
    docs: list[dict[str, str]]
    questions: list[list[str]]

    def ids(self, kb: int) -> set[str]:
        return set(self.docs[kb])


def read_scifact(data: Path) -> tuple[dict[str, dict], dict[str, str], dict[str, set[str]]]:
    """The corpus by id, the claims by id, and each test claim's evidence abstracts."""
    with (data / "corpus.jsonl").open() as f:
        corpus = {row["_id"]: row for row in map(json.loads, f)}
    with (data / "queries.jsonl").open() as f:
        claims = {row["_id"]: row["text"] for row in map(json.loads, f)}
    evidence: dict[str, set[str]] = defaultdict(set)
    for line in (data / "qrels" / "test.tsv").read_text().splitlines()[1:]:
        qid, doc, _ = line.split("\t")
        evidence[qid].add(doc)
    return corpus, claims, evidence


def partition(data: Path, kbs: int, docs_per_kb: int, rng: random.Random) -> Layout:
    """``kbs`` disjoint slices of ``docs_per_kb`` abstracts: each test claim goes to one
    knowledge base with its evidence, then spare abstracts fill each slice."""
    corpus, claims, evidence = read_scifact(data)
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
    return Layout(corpus, [{f"{d}.md": d for d in sorted(s)} for s in docs], questions)


def spread(data: Path, kbs: int, smallest: int, largest: int, rng: random.Random) -> Layout:
    """``kbs`` knowledge bases of ``smallest``-``largest`` abstracts each (uniform), abstracts
    shared between them: each takes the next test claims (round the shuffled list, up to three
    that fit) with their evidence, then random other abstracts."""
    corpus, claims, evidence = read_scifact(data)
    queries = sorted(evidence, key=int)
    rng.shuffle(queries)
    pool = sorted(corpus)
    docs: list[dict[str, str]] = []
    questions: list[list[str]] = []
    turn = 0
    for kb in range(kbs):
        size = rng.randint(smallest, largest)
        held: set[str] = set()
        asked: list[str] = []
        for _ in range(len(queries)):
            qid = queries[turn % len(queries)]
            turn += 1
            if len(held | evidence[qid]) <= size:
                held |= evidence[qid]
                asked.append(claims[qid])
            if len(asked) == 3 or len(held) >= size - 1:
                break
        while len(held) < size:
            held.add(rng.choice(pool))
        docs.append({f"k{kb:04d}-{d}.md": d for d in sorted(held)})
        questions.append(asked)
    return Layout(corpus, docs, questions)


def markdown(row: dict) -> bytes:
    return f"# {row['title']}\n\n{row['text']}\n".encode()


def over_http(base: str, admin: str, layout: Layout, threads: int = 4) -> list[str]:
    """One tenant, key and knowledge base per slice, uploaded through the service (a few
    at once); returns each knowledge base's ``Authorization`` header value."""
    headers = {"Authorization": f"Bearer {admin}"}

    def one(i: int) -> str:
        with httpx.Client(base_url=base, timeout=1200) as client:
            r = client.post("/v1/admin/tenants", json={"name": f"tenant{i:04d}"}, headers=headers)
            r.raise_for_status()
            r = client.post(f"/v1/admin/tenants/tenant{i:04d}/keys",
                            json={"rate_per_minute": RATE}, headers=headers)
            r.raise_for_status()
            key = {"Authorization": f"Bearer {r.json()['key']}"}
            client.post("/v1/kbs", json={"name": "kb"}, headers=key).raise_for_status()
            files = [("files", (name, markdown(layout.corpus[d])))
                     for name, d in sorted(layout.docs[i].items())]
            r = client.post("/v1/kbs/kb/documents?wait=true", files=files, headers=key)
            r.raise_for_status()
            bad = [f for f in r.json()["files"] if f["status"] == "rejected"]
            if bad:
                sys.exit(f"upload rejected: {bad[:3]}")
            print(f"  kb {i + 1}/{len(layout.docs)}: {len(layout.docs[i])} abstracts",
                  file=sys.stderr, flush=True)
            return key["Authorization"]

    with ThreadPoolExecutor(threads) as pool:
        return list(pool.map(one, range(len(layout.docs))))


class CachedVectors:
    """``sentence_vectors.embed_chunks`` with each chunk's result kept by the texts it was made
    from (the embedder, the text it embeds and the sentences it stores), on disk at ``path``:
    a chunk seen before, in any knowledge base or run, is never embedded again."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.known: dict[bytes, tuple[np.ndarray, Any]] = {}
        if path.exists():
            with path.open("rb") as f:
                self.known = pickle.load(f)
        self.made = self.saved = 0
        self.saved_at = time.monotonic()
        self.real = sentence_vectors.embed_chunks

    @staticmethod
    def key(model: Any, text: str, group: Sequence[str], options: tuple) -> bytes:
        return hashlib.sha256(json.dumps([model.name, text, list(group), repr(options)]).encode()
                              ).digest()

    def __call__(self, model: Any, chunks: Sequence[Any], headings: bool = True,
                 per_chunk: Sequence[list[str]] | None = None, *args: Any, **kw: Any
                 ) -> tuple[np.ndarray, list | None]:
        groups = per_chunk if per_chunk is not None else [[] for _ in chunks]
        keys = [self.key(model, c.embed_text if headings else c.text, g,
                         (per_chunk is None, args, sorted(kw.items())))
                for c, g in zip(chunks, groups, strict=True)]
        todo = [i for i, k in enumerate(keys) if k not in self.known]
        if todo:
            vectors, said = self.real(model, [chunks[i] for i in todo], headings,
                                      None if per_chunk is None else [groups[i] for i in todo],
                                      *args, **kw)
            for n, i in enumerate(todo):
                self.known[keys[i]] = (vectors[n], None if said is None else said[n])
            self.made += len(todo)
        rows = [self.known[k] for k in keys]
        return (np.stack([r[0] for r in rows]),
                None if per_chunk is None else [r[1] for r in rows])

    def save(self, force: bool = False) -> None:
        """Write the file when there is something new, at most once a minute unless ``force``
        (it grows to ~100 MB: written after every few knowledge bases, it would dominate)."""
        if self.made > self.saved and (force or time.monotonic() - self.saved_at > 60):
            self.saved, self.saved_at = self.made, time.monotonic()
            tmp = self.path.with_suffix(".tmp")
            with tmp.open("wb") as f:
                pickle.dump(self.known, f, protocol=pickle.HIGHEST_PROTOCOL)
            tmp.replace(self.path)


def direct(db: Path, layout: Layout, embedder: str,
           progress: Callable[[str], None] = lambda line: None) -> list[str]:
    """Tenants, keys and knowledge bases written through the store before the server starts,
    ingested by ``Engine.ingest`` with ``CachedVectors``; returns the ``Authorization`` values."""
    CACHE.mkdir(exist_ok=True)
    cache = CachedVectors(CACHE / f"load-vectors-{hashlib.sha256(embedder.encode()).hexdigest()[:10]}.pkl")
    sentence_vectors.embed_chunks = cache  # type: ignore[assignment]  # this process only
    store = open_store(str(db))
    engine = Engine(store)
    keys = []
    try:
        for i, held in enumerate(layout.docs):
            tenant = store.tenants.create_tenant(f"tenant{i:04d}")
            _, token = store.tenants.create_key(tenant, "tenant", None, (), RATE, "load")
            kb = engine.create_kb("kb", embedder, tenant=tenant.id)
            engine.ingest(kb, [_document(name, layout.corpus[d]) for name, d in sorted(held.items())])
            keys.append(f"Bearer {token}")
            if (i + 1) % 25 == 0 or i + 1 == len(layout.docs):
                progress(f"  {i + 1}/{len(layout.docs)} knowledge bases, "
                         f"{cache.made} chunks embedded, the rest cached")
                cache.save()
        cache.save(force=True)
    finally:
        sentence_vectors.embed_chunks = cache.real  # type: ignore[assignment]
        store.close()
    return keys


def _document(name: str, row: dict) -> Document:
    title, sections = read_markdown(markdown(row), name.removesuffix(".md"))
    return document(name, title, sections, f"upload:{name}")
