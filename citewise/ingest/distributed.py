"""Bulk ingestion on a Ray cluster (``citewise ingest --ray [ADDRESS]``), for corpora one CPU
cannot embed in reasonable time. Needs the optional extra: ``pip install 'citewise[ray]'``.

    plan (driver): files, and BEIR corpora cut into shards of lines at byte offsets
      ─► read     one task per file or shard                       (Ray Data flat_map)
      ─► ingest   batches of documents: chunk, embed, store        (Ray Data map_batches)
      ─► tally    the driver merges the batches' reports

Each worker opens the store by its URL with a connection of its own (SQLite waits on its busy
timeout for the write lock; a server store takes concurrent transactions) and runs the
engine's ingest on its batch: one transaction per document, unchanged content skipped by its
hash. That makes a run resumable without duplicates: Ray retries the tasks of a worker that
dies, and a run whose driver died is started again, skipping every document already stored.
Workers must be able to import citewise (installed on every node); a local instance started
here is given this process's import path.
"""

from __future__ import annotations

import logging
import os
import pickle
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from citewise.engine import Engine, IngestReport
from citewise.errors import ConfigError
from citewise.ingest.documents import Skipped, beir_line, read_file, sources
from citewise.stores import open_store

SHARD_LINES = 256  # BEIR corpus lines per read task
BATCH_DOCS = 16  # documents per chunk + embed + store task
OBJECT_STORE_BYTES = 128 * 2**20  # a local instance's shared memory: batches are small
_engines: dict[str, Engine] = {}  # per worker process: one store connection, one model


def _ray() -> Any:
    try:
        import ray
        import ray.data  # noqa: F401
    except ImportError:
        raise ConfigError("--ray needs the ray extra: pip install 'citewise[ray]'") from None
    return ray


def beir_shards(path: Path, lines: int = SHARD_LINES) -> list[dict[str, Any]]:
    """Read units of a BEIR corpus: byte offset, first line number and line count."""
    shards: list[dict[str, Any]] = []
    offset = 0
    with path.open("rb") as f:
        for number, line in enumerate(f, 1):
            if (number - 1) % lines == 0:
                shards.append({"file": str(path), "root": "", "offset": offset, "first": number,
                               "lines": 0})
            shards[-1]["lines"] += 1
            offset += len(line)
    return shards


def plan(paths: list[Path]) -> tuple[list[dict[str, Any]], list[Skipped]]:
    """Read units for ``paths`` (what ``documents.walk`` reads, cut into tasks)."""
    units: list[dict[str, Any]] = []
    missing: list[Skipped] = []
    for item in sources(paths):
        if isinstance(item, Skipped):
            missing.append(item)
        elif item[0] == item[1]:
            units += beir_shards(item[0])
        else:
            units.append({"file": str(item[0]), "root": str(item[1]), "offset": 0, "first": 1,
                          "lines": 1})
    return units, missing


def read_unit(unit: dict[str, Any]) -> list[dict[str, bytes]]:
    """Load one file, or one shard of a BEIR corpus, into pickled documents (or skips)."""
    path = Path(unit["file"])
    if unit["root"]:
        items: list = [read_file(path, Path(unit["root"]))]
    else:
        items = []
        with path.open("rb") as f:
            f.seek(unit["offset"])
            for number in range(unit["first"], unit["first"] + unit["lines"]):
                line = f.readline().decode("utf-8", errors="replace")
                if line.strip():
                    items.append(beir_line(path, number, line))
    return [{"item": pickle.dumps(item)} for item in items]


def ingest_batch(batch: dict[str, np.ndarray], store_url: str, kb_name: str) -> dict[str, list]:
    """Chunk, embed and store one batch on a worker; return its report, pickled."""
    engine = _engines.get(store_url)
    if engine is None:
        engine = _engines[store_url] = Engine(open_store(store_url))
    items = [pickle.loads(raw) for raw in batch["item"]]
    kb = engine.store.get_kb(kb_name)
    report = engine.ingest(kb, [i for i in items if not isinstance(i, Skipped)])
    report.skipped += [i for i in items if isinstance(i, Skipped)]
    return {"report": [pickle.dumps(report)]}


def start(address: str | None, workers: int | None) -> Any:
    """Connect to a cluster at ``address``, or start a small local instance (``local``)."""
    ray = _ray()
    quiet = {"include_dashboard": False, "log_to_driver": False, "ignore_reinit_error": True,
             "logging_level": logging.WARNING}
    for name in ("ray", "ray.data"):  # a token-auth notice and a progress-bar notice
        logging.getLogger(name).setLevel(logging.ERROR)
    if address in (None, "", "local"):
        here = str(Path(__file__).resolve().parent.parent)
        path = os.pathsep.join(p for p in (here, os.environ.get("PYTHONPATH", "")) if p)
        ray.init(num_cpus=workers or os.cpu_count(), object_store_memory=OBJECT_STORE_BYTES,
                 runtime_env={"env_vars": {"PYTHONPATH": path}}, **quiet)
    else:
        ray.init(address=address, **quiet)
    ray.data.DataContext.get_current().enable_progress_bars = False
    return ray


def absolute_url(url: str) -> str:
    """Workers run elsewhere: a SQLite store's path must not depend on this process's cwd."""
    prefix = "sqlite:///"
    if url.startswith(prefix):
        path, sep, query = url[len(prefix):].partition("?")
        return f"{prefix}{Path(path).resolve()}{sep}{query}"
    return url


def ingest(store_url: str, kb_name: str, paths: list[Path], address: str | None = "local",
           workers: int | None = None, progress: Callable[[int], None] | None = None,
           batch_docs: int = BATCH_DOCS) -> IngestReport:
    """Ingest ``paths`` into an existing knowledge base across a Ray cluster's workers."""
    started = time.perf_counter()
    units, missing = plan(paths)
    report = IngestReport(skipped=list(missing))
    if not units:
        return report
    # the execution path is chosen here, once, before any worker embeds (``Engine.record_path``)
    recorder = Engine(open_store(store_url))
    recorder.record_path(recorder.store.get_kb(kb_name))
    ray = start(address, workers)
    try:
        parallel = workers or max(1, int(ray.cluster_resources().get("CPU", 1)))
        ds = (ray.data.from_items(units, override_num_blocks=min(len(units), 4 * parallel))
              .flat_map(read_unit, num_cpus=0.5)
              .map_batches(ingest_batch, batch_size=batch_docs, batch_format="numpy",
                           fn_kwargs={"store_url": absolute_url(store_url), "kb_name": kb_name},
                           compute=ray.data.TaskPoolStrategy(size=parallel), num_cpus=1))
        for batch in ds.iter_batches(batch_size=None, batch_format="numpy"):
            for raw in batch["report"]:
                part: IngestReport = pickle.loads(raw)
                for field in ("added", "replaced", "unchanged", "skipped"):
                    getattr(report, field).extend(getattr(part, field))
                report.chunks += part.chunks
                if progress:
                    progress(len(part.added) + len(part.replaced) + len(part.unchanged)
                             + len(part.skipped))
    finally:
        ray.shutdown()
    report.seconds = time.perf_counter() - started
    return report
