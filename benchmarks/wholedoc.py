"""The published dense setup: one vector per document, title + " " + text, truncated.

sentence-transformers' BEIR evaluation embeds each document as ``title + " " + text`` and lets
the model cut it at its input limit (256 word pieces for all-MiniLM-L6-v2). citewise never
truncates (it chunks, or averages pieces), so this baseline calls the sentence-transformers
model directly. The matrix is cached under ``.bench/`` next to the document ids.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np

from benchmarks.benchcache import CACHE
from citewise.embedders import get_embedder


def whole_document_vectors(ids: list[str], texts: list[str], embedder: str,
                           name: str) -> tuple[np.ndarray, bool, float]:
    """(matrix with one unit row per document, built now?, seconds it took to build)."""
    path = CACHE / f"{name}-wholedoc-{embedder.replace(':', '_')}.npz"
    if path.exists():
        saved = np.load(path)
        if saved["ids"].tolist() == ids:
            return saved["matrix"], False, float(saved["seconds"])
    from sentence_transformers import SentenceTransformer  # the bench extra

    # the same weights through sentence-transformers itself: it truncates, as BEIR's setup does
    st = SentenceTransformer(str(get_embedder(embedder).path), device="cpu")  # type: ignore[attr-defined]
    started = time.perf_counter()
    matrix = st.encode(texts, batch_size=32, convert_to_numpy=True, normalize_embeddings=True,
                       show_progress_bar=False).astype(np.float32)
    seconds = time.perf_counter() - started
    CACHE.mkdir(exist_ok=True)
    tmp = Path(f"{path}.tmp.npz")
    np.savez(tmp, ids=np.array(ids), matrix=matrix, seconds=seconds)
    tmp.replace(path)
    return matrix, True, seconds
