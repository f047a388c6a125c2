"""Real MiniLM vectors for the scale benchmarks: SciFact chunks and claims, cached in ``.bench/``.

Chunks (text and vector) are read from a built SciFact store: ``--source`` or, by default, the
cache another benchmark keeps at ``.bench/scifact-default.db`` (its own worktree's or this
one's). Claims (train and test, the ones with qrels) are embedded once with the default model
and kept in ``.bench/scifact-claims.npz``.
"""

from __future__ import annotations

import csv
import json
import sqlite3
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from benchmarks.benchcache import shared_data

ROOT = Path(__file__).resolve().parent.parent
CACHE = ROOT / ".bench"
SOURCES = [CACHE / "scifact-default.db", ROOT.parent / "issue3" / ".bench" / "scifact-default.db",
           CACHE / "scifact-partial.db"]


@dataclass(frozen=True)
class Chunks:
    texts: list[str]
    titles: list[str]
    vectors: np.ndarray  # float32 unit rows
    source: str


@dataclass(frozen=True)
class Claims:
    split: np.ndarray  # "train" | "test"
    texts: list[str]
    vectors: np.ndarray

    def of(self, split: str) -> tuple[list[str], np.ndarray]:
        mask = self.split == split
        return [t for t, m in zip(self.texts, mask, strict=True) if m], self.vectors[mask]


def source_path(given: str | None = None) -> Path:
    for path in [Path(given)] if given else SOURCES:
        if path.exists():
            return path
    raise SystemExit("No SciFact store found; pass --source PATH (a store built from SciFact)")


def load_chunks(given: str | None = None) -> Chunks:
    path = source_path(given)
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    rows = db.execute("SELECT text, title, vector FROM chunks ORDER BY key").fetchall()
    db.close()
    vectors = np.frombuffer(b"".join(r[2] for r in rows), np.float32).reshape(len(rows), -1)
    return Chunks([r[0] for r in rows], [r[1] or "" for r in rows], vectors.copy(), str(path))


def load_claims() -> Claims:
    cached = CACHE / "scifact-claims.npz"
    if cached.exists():
        with np.load(cached) as f:
            return Claims(f["split"], json.loads(str(f["texts"])), f["vectors"])
    splits: dict[str, str] = {}
    for split in ("train", "test"):
        with (shared_data("scifact") / "qrels" / f"{split}.tsv").open() as f:
            for row in list(csv.reader(f, delimiter="\t"))[1:]:
                splits[row[0]] = split
    texts, labels = [], []
    for line in (shared_data("scifact") / "queries.jsonl").open():
        q = json.loads(line)
        if q["_id"] in splits:
            texts.append(q["text"])
            labels.append(splits[q["_id"]])
    from citewise.embedders import DEFAULT_EMBEDDER, get_embedder

    vectors = get_embedder(DEFAULT_EMBEDDER).embed(texts).astype(np.float32)
    CACHE.mkdir(exist_ok=True)
    np.savez(cached, split=np.array(labels), texts=np.array(json.dumps(texts)), vectors=vectors)
    return Claims(np.array(labels), texts, vectors)


def exact_top(matrix: np.ndarray, queries: np.ndarray, k: int) -> np.ndarray:
    """Exact top-k row indices per query (best first), in blocks to bound memory."""
    out = np.empty((len(queries), k), dtype=np.int64)
    for at in range(0, len(queries), 64):
        scores = queries[at : at + 64] @ matrix.T
        top = np.argpartition(-scores, k - 1, axis=1)[:, :k]
        order = np.take_along_axis(scores, top, 1).argsort(axis=1)[:, ::-1]
        out[at : at + 64] = np.take_along_axis(top, order, 1)
    return out


def recall_at(found: list[list[int]] | np.ndarray, truth: np.ndarray, k: int = 10) -> float:
    return float(np.mean([len(set(list(f)[:k]) & set(t[:k].tolist())) / k
                          for f, t in zip(found, truth, strict=True)]))
