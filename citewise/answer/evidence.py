"""Evidence at the sentence level: how well the single best sentence of the context matches
the question, and whether the two retrievers agree.

A question about the collection's topic that the collection does not answer (a *thin* one)
usually finds chunks on its subject: their cosines and the share of its words found somewhere
in the context look like a covered question's. What it lacks is one sentence that says what
was asked. These signals look there (``signals.measure`` puts them in ``Signals``):

- ``sentence_terms``: the IDF-weighted share of the question's **key terms** found in one
  sentence of the context (read with its chunk's title and headings, which say what its "it"
  refers to), the best sentence's share. Key terms are the question's content-word stems;
  numbers, acronyms and capitalised words inside the question (names) weigh
  ``ENTITY_WEIGHT`` times their IDF, because a detail the collection lacks is often one of
  them (a dose, a year, a drug's name). The IDF is taken over the retrieval's candidate pool,
  as for ``coverage``.
- ``sentence_cosine``: the highest cosine between the question's vector and the vector of
  one sentence of the context. The vectors are the ones ``ask`` reads for the citation check
  (stored at ingest, ``sentence_vectors.for_context``), so the gate reads them once and the
  answer path reuses them.
- ``agreement``: the share of the dense top ``AGREEMENT_K`` chunks that the keyword (BM25) top
  ``AGREEMENT_K`` holds too. When both retrievers find the same passages, the question's
  words and its meaning point at the same place.
"""

from __future__ import annotations

import math
import re
import sys
from collections.abc import Callable, Sequence
from functools import lru_cache

import numpy as np

from citewise.bounded import BoundedCache
from citewise.embedders import Embedder
from citewise.ingest.units import split_units
from citewise.records import Candidate, Chunk
from citewise.sentences import content_words, stem, stem_set, stems

ENTITY_WEIGHT = 2.0
AGREEMENT_K = 5
_TOKEN = re.compile(r"[A-Za-z0-9][\w\-.]*[A-Za-z0-9]|[A-Za-z0-9]")
_SENTENCE_START = re.compile(r"[.!?:;]\s*$")


def key_terms(question: str) -> dict[str, float]:
    """The question's content-word stems, each with its weight factor: ``ENTITY_WEIGHT`` for
    numbers, acronyms and capitalised words that do not start a sentence, else 1."""
    terms = dict.fromkeys(sorted(stems(question)), 1.0)
    for m in _TOKEN.finditer(question):
        token = m.group(0)
        starts = m.start() == 0 or bool(_SENTENCE_START.search(question[: m.start()]))
        named = (any(ch.isdigit() for ch in token)
                 or sum(ch.isupper() for ch in token) >= 2
                 or (token[0].isupper() and not starts))
        if named:
            for w in content_words(token):
                if stem(w) in terms:
                    terms[stem(w)] = ENTITY_WEIGHT
    return terms


def idf(terms: Sequence[str], pool: Sequence[frozenset[str]]) -> dict[str, float]:
    """``log(1 + (P - df + 0.5) / (df + 0.5))`` of each term over the ``P`` stem sets.
    ``df`` is counted with one set intersection per stem set, not one test per term and set."""
    wanted = frozenset(terms)
    df = dict.fromkeys(terms, 0)
    for p in pool:
        for t in wanted & p:
            df[t] += 1
    return {t: math.log(1.0 + (len(pool) - n + 0.5) / (n + 0.5)) for t, n in df.items()}


# the chunk stem sets kept between questions, by what they hold (``bounded.py``): ~7 kB each
# on SciFact, so ~9,000 chunks; an entry-count bound of 65,536 could have reached ~450 MB
CHUNK_STEMS_BYTES = 64 * 2**20
ChunkKey = tuple[str, tuple[str, ...], str]


def _stems_of(key: ChunkKey) -> frozenset[str]:
    return stem_set(*key)


def _held(key: ChunkKey, value: frozenset[str]) -> int:
    """What an entry keeps alive: its set (the stems themselves are ``stem``'s, shared) and
    the key's strings, which outlive the chunk they came from."""
    title, section, text = key
    return (sys.getsizeof(value) + 8 * len(value) + sys.getsizeof(text) + sys.getsizeof(title)
            + sum(map(sys.getsizeof, section)) + 200)


_chunk_stems: BoundedCache[ChunkKey, frozenset[str]] = BoundedCache(CHUNK_STEMS_BYTES, _held)


def chunk_stems(chunk: Chunk) -> frozenset[str]:
    """The stemmed content words of a chunk as retrieval indexes it: title, headings, text."""
    return _chunk_stems.get((chunk.title, chunk.section, chunk.text), _stems_of)


def context_sentences(context: Sequence[Candidate]) -> list[tuple[Candidate, str]]:
    """Each context chunk's sentences (``support.units`` without the whole passage), in order."""
    out = []
    for cand in context:
        for sentence in split_units(cand.chunk.text) or [cand.chunk.text]:
            out.append((cand, sentence))
    return out


def sentence_terms(question: str, sentences: Sequence[tuple[Candidate, str]],
                   pool: Sequence[frozenset[str]],
                   chunk_terms: Callable[[Candidate], frozenset[str]] | None = None) -> float:
    """The best sentence's IDF-weighted share of the question's key terms, in [0, 1].

    ``chunk_terms``: a candidate's stems (or those of the question's terms it holds), which
    hold every one of its sentences' stems: a chunk's share bounds its sentences', so chunks
    are read best bound first and a chunk whose bound cannot beat the best sentence so far is
    not stemmed sentence by sentence (the same value; stemming the sentences of a SciFact
    question's context was ~1 ms)."""
    factors = key_terms(question)
    if not factors or not sentences:
        return 0.0
    weights = idf(list(factors), pool)
    weights = {t: w * factors[t] for t, w in weights.items()}
    total = sum(weights.values())
    if total <= 0:
        return 0.0

    def share(found: frozenset[str]) -> float:
        return sum(w for t, w in weights.items() if t in found) / total

    by_chunk: dict[int, tuple[Candidate, list[str]]] = {}
    for cand, sentence in sentences:
        by_chunk.setdefault(id(cand), (cand, []))[1].append(sentence)
    bounds = {k: share(chunk_terms(cand)) if chunk_terms is not None else 1.0
              for k, (cand, _) in by_chunk.items()}
    best = 0.0
    for k in sorted(by_chunk, key=lambda k: -bounds[k]):  # stable: context order among equals
        if bounds[k] <= best:
            break
        cand, said = by_chunk[k]
        for sentence in said:
            best = max(best, share(_sentence_stems(cand.chunk.title, cand.chunk.section, sentence)))
    return best


@lru_cache(maxsize=1 << 12)
def _heading_stems(title: str, section: tuple[str, ...]) -> frozenset[str]:
    return frozenset(stems(" ".join((title, *section))))


@lru_cache(maxsize=1 << 14)  # about 1.7 kB each on SciFact: ~28 MB when full
def _sentence_stems(title: str, section: tuple[str, ...], sentence: str) -> frozenset[str]:
    """A sentence's stems with its chunk's title and headings: remembered, since the context
    sentences of one collection come back question after question."""
    return frozenset(stems(sentence)) | _heading_stems(title, section)


def sentence_cosine(sentences: Sequence[tuple[Candidate, str]], embedder: Embedder,
                    question_vector: np.ndarray) -> float:
    """The highest cosine between the question and one context sentence (unit vectors)."""
    return float(sentence_cosines(sentences, embedder, question_vector).max(initial=0.0))


def sentence_cosines(sentences: Sequence[tuple[Candidate, str]], embedder: Embedder,
                     question_vector: np.ndarray) -> np.ndarray:
    """The cosine between the question and each context sentence, in order."""
    if not sentences:
        return np.zeros(0, dtype=np.float32)
    texts = list(dict.fromkeys(s for _, s in sentences))
    vectors = embedder.embed(texts)
    found = dict(zip(texts, vectors @ np.asarray(question_vector, dtype=vectors.dtype), strict=True))
    return np.array([found[s] for _, s in sentences], dtype=np.float32)


def agreement(candidates: Sequence[Candidate], k: int = AGREEMENT_K) -> float:
    """The share of the dense top ``k`` chunks also in the keyword top ``k``, in [0, 1]."""
    dense = sorted((c for c in candidates if c.dense_rank), key=lambda c: c.dense_rank)[:k]
    keyword = {c.chunk.id for c in sorted((c for c in candidates if c.bm25_rank),
                                          key=lambda c: c.bm25_rank)[:k]}
    if not dense or not keyword:
        return 0.0
    return sum(c.chunk.id in keyword for c in dense) / k
