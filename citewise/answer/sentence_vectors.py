"""Sentence vectors made at ingest from each chunk's own forward pass, so no question pays for them.

The extractive generator compares every sentence of its context with the question, and the
citation check compares each sentence of a draft with the sentences of the passages it cites
and with each passage as a whole (``support.units``); the extractive generator's draft
sentences are the passages' own. ``texts`` lists these texts for one chunk.

With an embedder that gives its token states (``embed_tokens``: the local model), ingest runs
each chunk through the model once, as the text its vector is made from (after its heading
path, by default). The chunk's vector is the mean of all its token states, as before; a
sentence's vector is the normalised mean of the states of its own tokens (``late_chunking``),
so it is read in its passage, heading included; the passage as a whole takes the chunk's
vector. Other embedders (hosted ones, the tests' hashing one) embed each text once, on its
own, in the same call as the chunks.

The vectors are stored beside the chunk in the document's transaction
(``stores/sentence_rows.py``, migration m006; m009 dropped the local model's rows made before
sentences were read in their passage, m010 the rows of chunks with lists or tables made before
their units were split by structure, ``units.py``), each found by a hash of the embedder's name
and the text. A table row's vector is read at its own line (``units.anchor``): its header is
further up the same chunk. A text found in two chunks of one context takes the better-ranked chunk's vector.

At question time ``for_context`` reads the context's rows in one statement and returns an
embedder that answers from them. A chunk whose row lacks one of its texts (``put_document``
without ``sentences``, a row of another embedder, a knowledge base not yet backfilled since
m009 or m010) has its vectors made the same way when one of its texts is first needed; anything else
(the question is passed in, a hosted model's own sentences) is embedded.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import lru_cache
from typing import TypeGuard

import numpy as np

from citewise.answer import support
from citewise.embedders import Embedder
from citewise.embedders.base import TokenEmbedder
from citewise.generators import is_extractive
from citewise.generators.extractive import passage_units
from citewise.ingest import late_chunking
from citewise.ingest.units import anchor
from citewise.kb import KnowledgeBase
from citewise.records import Candidate, Chunk
from citewise.stores.roles import Answering, Knowledge
from citewise.stores.sentence_rows import SentenceVectors, text_key

BACKFILL_BATCH = 128  # chunks per embedding call and transaction
# float32: float16 halves the rows, but see benchmarks/sentence_vectors.py for what it changes
STORAGE_DTYPE = "f4"
# the passage as a whole: "chunk" (its vector, heading included) or "text" (the mean over the
# tokens of its text alone); chosen on SciFact train claims (benchmarks/citations.py)
WHOLE = "chunk"


def texts(chunk: Chunk, extractive: bool = True) -> list[str]:
    """The texts the answer path needs vectors of for ``chunk``: the citation check's units
    and, with ``extractive``, the extractive generator's sentences."""
    return list(_texts(chunk, extractive))


@lru_cache(maxsize=4096)
def _texts(chunk: Chunk, extractive: bool) -> tuple[str, ...]:
    out = list(support.units(chunk.text))
    if extractive:
        out += [sentence for _, sentence, _ in passage_units(chunk)]
    return tuple(dict.fromkeys(out))


def contextual(model: Embedder) -> TypeGuard[TokenEmbedder]:
    """Whether ``model`` gives token states, so sentences are read in their chunk."""
    return callable(getattr(model, "embed_tokens", None))


def _in_context(model: TokenEmbedder, chunks: Sequence[Chunk], inputs: list[str],
                per_chunk: Sequence[list[str]], whole: str) -> tuple[np.ndarray, list[np.ndarray]]:
    """One forward pass per chunk: the chunk vectors and, per chunk, its texts' vectors."""
    states = model.embed_tokens(inputs)
    vectors = np.zeros((len(chunks), model.dim), dtype=np.float32)
    found: list[list[np.ndarray | None]] = []
    for i, (chunk, text, (state, offsets), group) in enumerate(
            zip(chunks, inputs, states, per_chunk, strict=True)):
        vectors[i] = late_chunking.pooled(state, offsets, model.name)
        base = len(text) - len(chunk.text)  # the embedded text ends with the chunk's own
        units = support.units(chunk.text)
        joined = units[-1] if len(units) > 1 else None
        spans = [None if (t == joined and whole == "chunk") or s is None else (s[0] + base, s[1] + base)
                 for t, s in zip(group, late_chunking.spans(chunk.text, [anchor(t) for t in group]),
                                 strict=True)]
        means = late_chunking.span_means(state, offsets, spans, model.name)
        found.append([vectors[i] if t == joined and whole == "chunk" else v
                      for t, v in zip(group, means, strict=True)])
    # a text not found in its chunk's tokens is embedded on its own (in one call)
    alone = list(dict.fromkeys(t for group, vs in zip(per_chunk, found, strict=True)
                               for t, v in zip(group, vs, strict=True) if v is None))
    extra = dict(zip(alone, model.embed(alone), strict=True)) if alone else {}
    return vectors, [np.stack([v if v is not None else extra[t] for t, v in zip(group, vs, strict=True)])
                     if group else np.zeros((0, model.dim), np.float32)
                     for group, vs in zip(per_chunk, found, strict=True)]


def embed_chunks(model: Embedder, chunks: Sequence[Chunk], headings: bool = True,
                 per_chunk: Sequence[list[str]] | None = None, dtype: str = STORAGE_DTYPE,
                 whole: str = WHOLE, chunk_vectors: bool = True,
                 ) -> tuple[np.ndarray, list[SentenceVectors] | None]:
    """The chunks' vectors (of their text after the heading path, with ``headings``) and,
    given ``per_chunk`` (the texts of each chunk to store), their sentence vectors: one
    forward pass per chunk with a contextual embedder, else one ``embed`` call for the chunks
    and every distinct text (the texts alone without ``chunk_vectors``)."""
    inputs = [c.embed_text if headings else c.text for c in chunks]
    if per_chunk is None:
        return model.embed(inputs), None
    if contextual(model):
        vectors, each = _in_context(model, chunks, inputs, per_chunk, whole)
    else:
        inputs = inputs if chunk_vectors else []
        distinct = list(dict.fromkeys(t for group in per_chunk for t in group))
        every = model.embed([*inputs, *distinct])
        vectors = every[: len(inputs)]
        row = {t: i for i, t in enumerate(distinct, len(inputs))}
        each = [every[[row[t] for t in group]] if group else np.zeros((0, every.shape[1]), np.float32)
                for group in per_chunk]
    return vectors, [SentenceVectors.build(model.name, group, v, dtype)
                     for group, v in zip(per_chunk, each, strict=True)]


class StoredFirst:
    """An embedder that answers texts with a stored vector from it, makes the vectors of a
    ``pending`` chunk (one without a row) when one of its texts is asked for, and embeds only
    the rest. The rows of the ``unchecked`` chunks are served as they are: a text asked for
    that none holds is looked for among those chunks' texts first (a row of another embedder,
    or made before the chunk's texts changed, lacks some), and its chunk's vectors are made
    as a pending chunk's. Checking every row's texts up front split each context chunk into
    its texts and hashed them on every question's first sight of it (~0.5 ms of a SciFact
    question's gate); a complete row, the usual case, needs none of that.

    ``embedded`` counts the texts it embedded on their own, ``passes`` the chunks it ran. Its
    vectors are read in this context's chunks, so the process-wide cache never keeps them."""

    memoise = False

    def __init__(self, model: Embedder, stored: dict[bytes, np.ndarray],
                 pending: Sequence[Chunk] = (), headings: bool = True, extractive: bool = True,
                 unchecked: Sequence[Chunk] = ()) -> None:
        self.model, self.stored = model, stored
        self.name, self.dim, self.max_tokens = model.name, model.dim, model.max_tokens
        self.headings, self.extractive = headings, extractive
        self.pending = [(c, texts(c, extractive)) for c in pending]
        self.unchecked = list(unchecked)
        self.embedded = self.passes = 0

    def count_tokens(self, text: str) -> int:
        return self.model.count_tokens(text)

    def _make(self, wanted: set[str]) -> None:
        now = [(c, group) for c, group in self.pending if wanted.intersection(group)]
        if not now:
            return
        self.pending = [p for p in self.pending if p not in now]
        _, said = embed_chunks(self.model, [c for c, _ in now], self.headings,
                               [g for _, g in now], chunk_vectors=False)
        if contextual(self.model):
            self.passes += len(now)
        else:
            self.embedded += len({t for _, g in now for t in g})
        for s in said or []:
            for key, vector in s.lookup().items():
                self.stored.setdefault(key, vector)

    def embed(self, texts: list[str], *, progress: bool = False) -> np.ndarray:
        if self.pending or self.unchecked:
            wanted = {t for t in texts if text_key(self.name, t) not in self.stored}
            if wanted and self.unchecked:  # a row lacking a text: its chunk is made as pending
                kept = []
                for c in self.unchecked:
                    group = list(_texts(c, self.extractive))
                    if wanted.intersection(group):
                        self.pending.append((c, group))
                    else:
                        kept.append(c)
                self.unchecked = kept
            self._make(wanted)
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


def for_context(store: Answering, kb: KnowledgeBase, model: Embedder, context: Sequence[Candidate],
                known: dict[str, np.ndarray] | None = None, generator: str | None = None,
                read: dict[str, SentenceVectors | None] | None = None) -> StoredFirst:
    """``model`` with the stored sentence vectors of the context's chunks (one read), and the
    ``known`` vectors (the question's, already embedded for retrieval). ``generator``: the one
    that will answer, when not the knowledge base's. ``read`` holds the rows one question has
    read so far by chunk id (None: the chunk has none); only the chunks it lacks are read, and
    it is given those, so a question with several parts reads each chunk's row once."""
    extractive = is_extractive(generator or kb.config.generator)
    ids = list(dict.fromkeys(c.chunk.id for c in context))
    if read is None:
        found: dict[str, SentenceVectors | None] = {**store.sentence_vectors(kb, ids)} if ids else {}
    else:
        missing = [i for i in ids if i not in read]
        if missing:
            fresh = store.sentence_vectors(kb, missing)
            read.update({i: fresh.get(i) for i in missing})
        found = read
    stored: dict[bytes, np.ndarray] = {}
    pending: dict[str, Chunk] = {}
    unchecked: dict[str, Chunk] = {}
    for cand in context:  # best-ranked first: its vector of a shared text wins
        row = found.get(cand.chunk.id)
        if row is None:
            pending.setdefault(cand.chunk.id, cand.chunk)
            continue
        for key, vector in row.lookup().items():
            stored.setdefault(key, vector)
        unchecked.setdefault(cand.chunk.id, cand.chunk)
    stored.update({text_key(model.name, t): v for t, v in (known or {}).items()})
    return StoredFirst(model, stored, list(pending.values()), kb.config.embed_headings, extractive,
                       list(unchecked.values()))


def backfill(store: Knowledge, kb: KnowledgeBase, model: Embedder, batch: int = BACKFILL_BATCH,
             progress: Callable[[int], None] | None = None) -> int:
    """Make and store the sentence vectors of every chunk stored without them (a knowledge
    base ingested before m006 or migrated by m009, or just switched to another embedder);
    how many chunks."""
    extractive = is_extractive(kb.config.generator)
    after, done = -1, 0
    while listed := store.chunks_without_sentences(kb, after, batch):
        chunks = store.chunks(kb, listed)
        keys = [k for k in listed if k in chunks]  # one deleted meanwhile is skipped
        _, said = embed_chunks(model, [chunks[k] for k in keys], kb.config.embed_headings,
                               [texts(chunks[k], extractive) for k in keys], chunk_vectors=False)
        store.put_sentence_vectors(kb, [(k, chunks[k].id, s)
                                        for k, s in zip(keys, said or [], strict=True)])
        after, done = listed[-1], done + len(keys)
        if progress:
            progress(len(keys))
    return done
