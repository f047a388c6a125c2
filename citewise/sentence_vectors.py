"""Sentence vectors embedded at ingest, so that no question pays for them.

To answer, the extractive generator embeds every sentence of its context after the sentence's
heading path, and the citation check embeds every sentence of each cited passage and the
passage's sentences joined (``support.units``), besides the draft's own sentences, which the
extractive generator takes from the passages. ``texts`` lists all of these for one chunk;
ingest embeds them in the same call as the chunks and stores them beside the chunk, in the
document's transaction (``stores/sentence_rows.py``, migration m006).

At question time ``for_context`` reads the stored vectors of the context's chunks in one
statement and returns an embedder that answers those texts from them and embeds only the
rest: a knowledge base ingested before m006, chunks written without sentence vectors
(``put_document`` without ``sentences``), a knowledge base just switched to another embedder,
a hosted model's own sentences. A vector is found by a hash of the embedder's name and the
text, so it is never used for another text or another embedder.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from . import support
from .embedders import Embedder
from .generators.extractive import passage_units
from .kb import KnowledgeBase
from .records import Candidate, Chunk
from .stores.base import Store
from .stores.sentence_rows import SentenceVectors, text_key

BACKFILL_BATCH = 128  # chunks per embedding call and transaction
# float32: float16 halves the rows, but see benchmarks/sentence_vectors.py for what it changes
STORAGE_DTYPE = "f4"


def texts(chunk: Chunk, extractive: bool = True) -> list[str]:
    """The texts the answer path embeds for ``chunk``: the citation check's units and, with
    ``extractive``, the extractive generator's sentences (after their headings, and bare)."""
    out = list(support.units(chunk.text))
    if extractive:
        for _, bare, embedded in passage_units(chunk):
            out += [embedded, bare]
    return list(dict.fromkeys(out))


def embed_with_sentences(model: Embedder, chunk_texts: list[str], per_chunk: Sequence[list[str]],
                         dtype: str = STORAGE_DTYPE) -> tuple[np.ndarray, list[SentenceVectors]]:
    """One ``embed`` call for the chunks' texts and every distinct sentence text; the chunk
    vectors and, per chunk, its sentence vectors."""
    distinct = list(dict.fromkeys(t for group in per_chunk for t in group))
    every = model.embed([*chunk_texts, *distinct])
    vectors = every[: len(chunk_texts)]
    row = {t: i for i, t in enumerate(distinct, len(chunk_texts))}
    sentences = [SentenceVectors.build(model.name, group, every[[row[t] for t in group]]
                                       if group else np.zeros((0, every.shape[1]), np.float32), dtype)
                 for group in per_chunk]
    return vectors, sentences


class StoredFirst:
    """An embedder that answers texts with a stored vector from it and embeds only the rest.

    ``embedded`` counts the texts it had to embed."""

    def __init__(self, model: Embedder, stored: dict[bytes, np.ndarray]) -> None:
        self.model, self.stored = model, stored
        self.name, self.dim, self.max_tokens = model.name, model.dim, model.max_tokens
        self.embedded = 0

    def count_tokens(self, text: str) -> int:
        return self.model.count_tokens(text)

    def embed(self, texts: list[str], *, progress: bool = False) -> np.ndarray:
        keys = [text_key(self.name, t) for t in texts]
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        missing = [i for i, k in enumerate(keys) if k not in self.stored]
        if missing:
            out[missing] = self.model.embed([texts[i] for i in missing], progress=progress)
            self.embedded += len(missing)
        for i, k in enumerate(keys):
            if k in self.stored:
                out[i] = self.stored[k]
        return out


def for_context(store: Store, kb: KnowledgeBase, model: Embedder, context: Sequence[Candidate],
                known: dict[str, np.ndarray] | None = None) -> StoredFirst:
    """``model`` with the stored sentence vectors of the context's chunks (one read), and the
    ``known`` vectors (the question's, already embedded for retrieval)."""
    stored = {text_key(model.name, t): v for t, v in (known or {}).items()}
    if context:
        for found in store.sentence_vectors(kb, [c.chunk.id for c in context]).values():
            stored.update(found.lookup())
    return StoredFirst(model, stored)


def backfill(store: Store, kb: KnowledgeBase, model: Embedder, batch: int = BACKFILL_BATCH,
             progress: Callable[[int], None] | None = None) -> int:
    """Embed and store the sentence vectors of every chunk stored without them (a knowledge
    base ingested before m006, or just switched to another embedder); how many chunks."""
    extractive = kb.config.generator.partition(":")[0] == "extractive"
    after, done = -1, 0
    while listed := store.chunks_without_sentences(kb, after, batch):
        chunks = store.chunks(kb, listed)
        keys = [k for k in listed if k in chunks]  # one deleted meanwhile is skipped
        _, said = embed_with_sentences(model, [], [texts(chunks[k], extractive) for k in keys])
        store.put_sentence_vectors(kb, [(k, chunks[k].id, s) for k, s in zip(keys, said, strict=True)])
        after, done = listed[-1], done + len(keys)
        if progress:
            progress(len(keys))
    return done
