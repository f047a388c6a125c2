"""Synthetic tenants for the wall test and the store benchmark: many knowledge bases whose
chunks share a vocabulary but each carry their own marker word, with random unit vectors.

Everything is a function of (seed, tenant number), so a check can regenerate what a tenant
should hold without keeping it in memory.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from citewise.records import Chunk, Document, Section

VOCABULARY = (
    "nicotine patch lozenge varenicline bupropion craving relapse withdrawal counselling "
    "quitline smoking cessation tobacco cigarette vaping pregnancy weight insomnia anxiety "
    "trial placebo dose tablet week month abstinence support therapy behavioural outcome"
).split()


def marker(tenant: int) -> str:
    """A word only this tenant's chunks contain (letters, so every tokenizer keeps it whole)."""
    letters = "".join(chr(ord("a") + int(d)) for d in f"{tenant:05d}")
    return f"tenant{letters}mark"


def tenant_docs(
    tenant: int, chunks: int, dim: int, seed: int = 7, per_doc: int = 100
) -> Iterator[tuple[Document, list[Chunk], np.ndarray]]:
    """The tenant's documents of ``per_doc`` chunks, texts and vectors fixed by the seed."""
    rng = np.random.default_rng([seed, tenant])
    mark = marker(tenant)
    vectors = rng.standard_normal((chunks, dim), dtype=np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    picks = rng.integers(0, len(VOCABULARY), size=(chunks, 12))
    for start in range(0, chunks, per_doc):
        doc_id = f"{mark}/doc{start // per_doc}.md"
        texts = [
            f"{mark} " + " ".join(VOCABULARY[w] for w in picks[i]) + f" passage{i}"
            for i in range(start, min(start + per_doc, chunks))
        ]
        doc = Document(doc_id, f"{mark} notes", (Section(("Notes",), tuple(texts)),), doc_id)
        rows = [Chunk(doc_id, n, ("Notes",), t, doc.title) for n, t in enumerate(texts)]
        yield doc, rows, vectors[start : start + len(texts)]


def fill(store: Any, tenants: int, chunks: int, dim: int, embedder: str,
         progress: Callable[[int], None] | None = None) -> list[Any]:
    """Create ``tenants`` knowledge bases named ``t00000``... and ingest their documents."""
    from citewise.kb import KBConfig

    kbs = []
    for t in range(tenants):
        kb = store.create_kb(f"t{t:05d}", KBConfig(embedder=embedder, dim=dim))
        for doc, rows, vectors in tenant_docs(t, chunks, dim):
            store.put_document(kb, doc, rows, vectors)
        kbs.append(kb)
        if progress:
            progress(t)
    return kbs
