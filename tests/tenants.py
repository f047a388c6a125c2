"""Synthetic tenants for the wall test and the store benchmark: many knowledge bases whose
chunks share a vocabulary but each carry their own marker word, with random unit vectors.

A chunk is its tenant's marker, two words of ``VOCABULARY`` (each then in ~7% of chunks, and
in every tenant) and 60 pseudo-words drawn by Zipf's law over 20,000 (ranks 100 and up, as
if the commonest words were stop words: the commonest here is in ~11% of chunks), so keyword
queries meet posting lists of natural-language lengths.

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


_SYLLABLES = [c + v for c in "bdfgklmnprtvz" for v in "aiou"]
WORDS = np.array([
    _SYLLABLES[i // 2704] + _SYLLABLES[i // 52 % 52] + _SYLLABLES[i % 52]
    for i in range(0, 20_000 * 7, 7)  # spread over the 140,608 three-syllable words
])
_RANK = 1.0 / np.arange(100, 100 + len(WORDS))
ZIPF = _RANK / _RANK.sum()


def zipf_words(rng: np.random.Generator, n: int) -> list[str]:
    return [str(w) for w in WORDS[rng.choice(len(WORDS), size=n, p=ZIPF)]]


def marker(tenant: int) -> str:
    """A word only this tenant's chunks contain (letters, so every tokenizer keeps it whole)."""
    letters = "".join(chr(ord("a") + int(d)) for d in f"{tenant:05d}")
    return f"tenant{letters}mark"


def tenant_docs(
    tenant: int, chunks: int, dim: int, seed: int = 7, per_doc: int = 100, words: int = 60
) -> Iterator[tuple[Document, list[Chunk], np.ndarray]]:
    """The tenant's documents of ``per_doc`` chunks of ``words`` Zipf words and three more,
    texts and vectors fixed by the seed."""
    rng = np.random.default_rng([seed, tenant])
    mark = marker(tenant)
    vectors = rng.standard_normal((chunks, dim), dtype=np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    picks = rng.integers(0, len(VOCABULARY), size=(chunks, 2))
    body = WORDS[rng.choice(len(WORDS), size=(chunks, words), p=ZIPF)]
    for start in range(0, chunks, per_doc):
        doc_id = f"{mark}/doc{start // per_doc}.md"
        texts = [
            f"{mark} {VOCABULARY[picks[i, 0]]} {' '.join(body[i])} {VOCABULARY[picks[i, 1]]}."
            for i in range(start, min(start + per_doc, chunks))
        ]
        doc = Document(doc_id, f"{mark} notes", (Section(("Notes",), tuple(texts)),), doc_id)
        rows = [Chunk(doc_id, n, ("Notes",), t, doc.title) for n, t in enumerate(texts)]
        yield doc, rows, vectors[start : start + len(texts)]


def fill(store: Any, tenants: int, chunks: int, dim: int, embedder: str, words: int = 60,
         per_doc: int = 100, progress: Callable[[int], None] | None = None) -> list[Any]:
    """Create ``tenants`` knowledge bases named ``t00000``... and ingest their documents."""
    from citewise.kb import KBConfig

    kbs = []
    for t in range(tenants):
        kb = store.create_kb(f"t{t:05d}", KBConfig(embedder=embedder, dim=dim))
        for doc, rows, vectors in tenant_docs(t, chunks, dim, per_doc=per_doc, words=words):
            store.put_document(kb, doc, rows, vectors)
        kbs.append(kb)
        if progress:
            progress(t)
    return kbs
