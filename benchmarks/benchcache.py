"""The benchmarks' shared helpers: built knowledge bases cached under ``.bench/`` so benchmarks
reuse them between runs, the shared data sets, and the latency cells and loops several print.

A store is keyed by what ingest depends on (embedder, chunker and, for ``sections``, its
sentence overlap, whether headings are embedded);
retrieval settings are applied at query time and need no rebuild. The default settings are
cached at ``.bench/<name>-default.db``, others at ``.bench/<name>-<key>.db``. A store is built
into a temporary file and renamed into place when complete, so a half-built file is never
reused (or copied by someone else). The key's code version is that of the code the process
imported, recorded in the store too: a long run labels what it builds by the code it runs, even
when the files change under it, and a store whose record differs (or is missing) is rebuilt.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import numpy as np

from citewise.embedders import DEFAULT_EMBEDDER, get_embedder
from citewise.engine import Engine
from citewise.ingest.chunking import OVERLAP_SENTENCES, Chunker, SectionsChunker, get_chunker
from citewise.kb import KBConfig, KnowledgeBase, Retrieval
from citewise.records import Document
from citewise.search.retrieval import keyword_search
from citewise.stores.sql import SQLStore
from citewise.stores.sqlite import open_sqlite

ROOT = Path(__file__).resolve().parent.parent
CACHE = ROOT / ".bench"
KB_NAME = "bench"


def shared_data(name: str) -> Path:
    """``shared/data/<name>`` beside the checkout (or any folder above it), or under
    ``$CITEWISE_DATA``; the data sets are never copied into the repository."""
    bases = [Path(os.environ["CITEWISE_DATA"])] if os.environ.get("CITEWISE_DATA") else []
    bases += [parent / "shared" / "data" for parent in ROOT.parents]
    for base in bases:
        if (base / name).is_dir():
            return base / name
    raise SystemExit(f"{name} not found in shared/data beside the checkout; "
                     f"set CITEWISE_DATA to the folder that holds it")


def host() -> str:
    """This machine's CPU and two reference timings, printed with every timing table: the same
    kind of machine has been seen twice as fast on one day as on another, so a table is read
    beside these (best of five: a Python loop of 1M additions, a 10,000 x 384 float32
    matrix-vector product on one thread)."""
    from threadpoolctl import threadpool_limits

    model = mhz = "?"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, value = line.partition(":")
            if key.strip() == "model name" and model == "?":
                model = value.strip()
            elif key.strip() == "cpu MHz" and mhz == "?":
                mhz = f"{float(value):.0f} MHz"
    except OSError:
        pass
    loop = []
    for _ in range(5):
        t = time.perf_counter()
        total = 0
        for i in range(1_000_000):
            total += i
        loop.append(time.perf_counter() - t)
    matrix, query = np.ones((10_000, 384), np.float32), np.ones(384, np.float32)
    product = []
    with threadpool_limits(1, "blas"):
        for _ in range(5):
            t = time.perf_counter()
            matrix @ query
            product.append(time.perf_counter() - t)
    return (f"host: {model}, {mhz}, {os.cpu_count()} cores; reference: Python loop of 1M "
            f"additions {min(loop) * 1000:.0f} ms, matrix-vector product {min(product) * 1000:.2f} ms")


def conditions() -> str:
    """The load average and this process's CPU time so far: printed under a table, so a number
    taken on a busy machine is read as such."""
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    t = os.times()
    return f"load average {load}; this process's CPU time {t.user + t.system:.1f} s"


@dataclass(frozen=True)
class Built:
    engine: Engine
    kb: KnowledgeBase
    path: Path
    built: bool  # False when reused from the cache
    ingest_seconds: float  # of this run's build, or as recorded when it was built
    chunks: int
    note: str = ""  # how the build ran, when it was not one uninterrupted ingest


# what a built store's content depends on: a change to any of these rebuilds it
INGEST_CODE = ("citewise/ingest", "citewise/embedders", "citewise/stores", "citewise/records.py",
               "citewise/sentences.py", "citewise/kb.py")


@cache
def code_version() -> str:
    """A hash of the code that writes a store (``INGEST_CODE``), so that a cached store is never
    reused after that code changed; taken once, when this module is imported (below), so it is
    the code this process runs: read at each build, a run of an hour labelled stores built by
    the code it had loaded with the hash of files edited since."""
    digest = hashlib.sha256()
    for part in INGEST_CODE:
        path = ROOT / part
        for file in sorted(path.rglob("*.py")) if path.is_dir() else [path]:
            digest.update(file.relative_to(ROOT).as_posix().encode() + b"\0" + file.read_bytes())
    return digest.hexdigest()[:8]


code_version()  # the code this process imported (``citewise.ingest`` and the rest, above)


def _reusable(path: Path) -> bool:
    """``path`` exists and records that it was built by the code this process runs."""
    if not path.exists():
        return False
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        row = conn.execute("SELECT value FROM bench_meta WHERE key = 'code'").fetchone()
    except sqlite3.OperationalError:
        row = None
    finally:
        conn.close()
    return row is not None and row[0] == code_version()


def cache_path(name: str, embedder: str, chunker: str, embed_headings: bool,
               overlap: int = OVERLAP_SENTENCES, embed_path: str = "") -> Path:
    """``embed_path``: the local model's execution path the store's vectors are made on, when
    named ("": the host's fastest, as ingest chooses it, not in the key)."""
    code = code_version()
    if (embedder, chunker, embed_headings, overlap, embed_path) == (
            DEFAULT_EMBEDDER, "sections", True, OVERLAP_SENTENCES, ""):
        return CACHE / f"{name}-default-{code}.db"
    # the default overlap and path are not in the key: the other settings' keys stay as they were
    settings = [embedder, chunker, embed_headings] + (
        [overlap] if overlap != OVERLAP_SENTENCES else []) + ([embed_path] if embed_path else [])
    key = hashlib.sha256(json.dumps(settings).encode()).hexdigest()[:10]
    label = ("noheadings-" if not embed_headings else "") + (
        f"overlap{overlap}-" if overlap != OVERLAP_SENTENCES else "") + (
        f"{embed_path}-" if embed_path else "")
    return CACHE / f"{name}-{label}{key}-{code}.db"


def chunker_for(embedder: str, chunker: str, overlap: int = OVERLAP_SENTENCES) -> Chunker:
    """The chunker ``chunker`` as ingest builds it for ``embedder`` (the registry's), with
    ``overlap`` sentences repeated where ``sections`` splits a paragraph."""
    model = get_embedder(embedder)
    additive = getattr(model, "tokens_add_up", False)
    shipped = get_chunker(chunker, model.count_tokens, model.max_tokens, additive)
    if overlap == OVERLAP_SENTENCES:
        return shipped
    if not isinstance(shipped, SectionsChunker):
        raise ValueError(f"overlap is the {SectionsChunker.name} chunker's, not {chunker}'s")
    return SectionsChunker(model.count_tokens, shipped.limit, overlap, additive)  # the registry's limit


def build_or_reuse(
    name: str,
    documents: Callable[[], Iterable[Document]] | Callable[[], Iterable[Path]],
    embedder: str = DEFAULT_EMBEDDER,
    chunker: str = "sections",
    embed_headings: bool = True,
    progress: Callable[[int], None] | None = None,
    overlap: int = OVERLAP_SENTENCES,
    embed_path: str = "",
) -> Built:
    """Open the cached store for these settings, or build it (and record the ingest time);
    ``overlap``: the sentences the ``sections`` chunker repeats where it splits a paragraph;
    ``embed_path``: the local model's execution path (``embedders/runtimes.py``; "": the
    host's fastest)."""
    path = cache_path(name, embedder, chunker, embed_headings, overlap, embed_path)
    built = not _reusable(path)
    if built:
        CACHE.mkdir(exist_ok=True)
        tmp = path.with_suffix(f".building-{os.getpid()}")
        for leftover in (tmp, Path(f"{tmp}-wal"), Path(f"{tmp}-shm")):
            leftover.unlink(missing_ok=True)
        store = open_sqlite(tmp)
        engine = Engine(store)
        kb = engine.open_kb(KB_NAME, embedder=embedder, chunker=chunker)
        if not embed_headings or embed_path:
            from dataclasses import replace

            kb = store.update_kb(KB_NAME, replace(kb.config, embed_headings=embed_headings,
                                                  embed_path=embed_path))
        custom = chunker_for(embedder, chunker, overlap) if overlap != OVERLAP_SENTENCES else None
        started = time.perf_counter()
        report = engine.ingest(kb, documents(), progress=progress, chunker=custom)
        seconds = time.perf_counter() - started
        db = store.db.conn
        db.execute("CREATE TABLE IF NOT EXISTS bench_meta (key TEXT PRIMARY KEY, value TEXT)")
        db.execute("INSERT OR REPLACE INTO bench_meta VALUES ('ingest_seconds', ?)", (str(seconds),))
        db.execute("INSERT OR REPLACE INTO bench_meta VALUES ('code', ?)", (code_version(),))
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        store.close()
        os.replace(tmp, path)
        for leftover in (Path(f"{tmp}-wal"), Path(f"{tmp}-shm")):
            leftover.unlink(missing_ok=True)
        del report
    store = open_sqlite(path)
    engine = Engine(store)
    kb = store.get_kb(KB_NAME)
    try:
        meta = dict(store.db.conn.execute("SELECT key, value FROM bench_meta").fetchall())
    except sqlite3.OperationalError:
        meta = {}
    return Built(engine, kb, path, built, float(meta.get("ingest_seconds", "nan")),
                 store.count_chunks(kb), meta.get("note", ""))


def config_of(built: Built) -> KBConfig:
    return built.kb.config


def p50_p99(ms: Sequence[float], sep: str = "/") -> str:
    """A latency cell: the median and 99th percentile of ``ms``, one decimal each."""
    return f"{np.percentile(ms, 50):.1f}{sep}{np.percentile(ms, 99):.1f}"


def pruning_rows(store: object, kb: KnowledgeBase, questions: Sequence[str], unpruned: Retrieval,
                 pruned: Retrieval, depths: Sequence[int] = (10,)
                 ) -> tuple[np.ndarray, np.ndarray, dict[int, float]]:
    """Keyword search of each question, unpruned then pruned: the milliseconds of each, and per
    depth the mean share of the unpruned top ``depth`` that the pruned search also returns."""
    before, after = [], []
    agree: dict[int, list[float]] = {k: [] for k in depths}
    for question in questions:
        t = time.perf_counter()
        base = keyword_search(store, kb, question, unpruned)
        before.append((time.perf_counter() - t) * 1000)
        t = time.perf_counter()
        hits = keyword_search(store, kb, question, pruned)
        after.append((time.perf_counter() - t) * 1000)
        for k, out in agree.items():
            want = {key for key, _ in base[:k]}
            out.append(len(want & {key for key, _ in hits[:k]}) / max(len(want), 1))
    return np.asarray(before), np.asarray(after), {k: float(np.mean(v)) for k, v in agree.items()}


@contextmanager
def sqlite_copy(path: Path, **options: int) -> Iterator[SQLStore]:
    """A SQLStore on a consistent copy of the store file at ``path`` (SQLite's backup API,
    read-only on the original), so a benchmark never writes to a cached or shared store;
    ``options`` are ``open_sqlite``'s (``keyword_index_max_chunks=0``: FTS5 keyword search)."""
    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / path.name
        source = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        target = sqlite3.connect(copy)
        try:
            source.backup(target)
        finally:
            source.close()
            target.close()
        store = open_sqlite(copy, **options)  # type: ignore[arg-type]
        try:
            yield store
        finally:
            store.close()
