"""The gate's signals of one question, measured in one place (``measure``), into ``Signals``.

- ``top1``, ``mean``, ``pool``: raw cosines of the candidates, the context, the dense top-k;
- ``coverage``: the IDF-weighted share of the question's content words found in the context
  (here), the IDF over the retrieval's own candidates;
- ``margin``, ``sentence_terms``, ``sentence_cosine``, ``agreement``: at the sentence level,
  computed by ``evidence.py``;
- ``kb_terms``: whether the knowledge base holds the question's key terms at all
  (``absent.py``);
- ``answerable``: the reader's, set by ``Engine.decide`` when the gate's policy reads.

How a policy turns them into one number, and the thresholds: ``gate.py``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import numpy as np

from citewise.answer import absent, evidence
from citewise.answer.evidence import chunk_stems
from citewise.embedders import Embedder
from citewise.records import Candidate, Signals
from citewise.sentences import stems


def _terms_of(candidates: Sequence[Candidate], pool: Sequence[frozenset[str]]
              ) -> Callable[[Candidate], frozenset[str]]:
    """A candidate's stem set: its chunk's entry of ``pool`` (in the candidates' order; the
    context is of the candidates), else stemmed now."""
    chunks = [c.chunk for c in candidates]
    known = dict(zip(chunks, pool, strict=True)) if len(pool) == len(chunks) else {}
    return lambda c: known[c.chunk] if c.chunk in known else chunk_stems(c.chunk)


def coverage(question: str, context: Sequence[Candidate], candidates: Sequence[Candidate],
             pool: Sequence[frozenset[str]] | None = None,
             terms_of: Callable[[Candidate], frozenset[str]] | None = None) -> float:
    """IDF-weighted share of the question's content words found in the context, in [0, 1].

    The IDF of a word is ``log(1 + (P - df + 0.5) / (df + 0.5))`` over the ``P`` candidates
    retrieval considered, ``df`` of which contain it; ``pool``, their stems when the caller
    has them already (``chunk_stems`` of each candidate), and ``terms_of`` a candidate's
    (``_terms_of``).
    """
    terms = sorted(stems(question))
    if not terms or not context:
        return 0.0
    if not pool:
        pool = [chunk_stems(c.chunk) for c in candidates] or [chunk_stems(c.chunk) for c in context]
    found = frozenset().union(*map(terms_of or _terms_of(candidates, pool), context))
    weights = evidence.idf(terms, pool)
    total = sum(weights.values())
    return sum(w for t, w in weights.items() if t in found) / total


def pool_terms(question: str) -> frozenset[str]:
    """The stems the signals look for in the candidates' stem sets: the question's content
    stems (coverage, ``sentence_terms``) and ``absent.terms`` (``kb_terms``)."""
    return frozenset(stems(question)) | frozenset(absent.terms(question))


def measure(context: Sequence[Candidate], candidates: Sequence[Candidate], question: str,
            sentences: Embedder | None = None, question_vector: np.ndarray | None = None,
            held: Mapping[str, int] | None = None,
            stems_of: Sequence[frozenset[str]] | None = None) -> Signals:
    """Top-1 cosine over every candidate, mean cosine over the context, the coverage of the
    question's words by the context, the mean cosine of the dense top-k, and the
    sentence-level evidence (``evidence.py``); ``sentence_cosine`` needs an embedder that
    gives the context sentences' vectors (``sentence_vectors.for_context``) and the
    question's vector, and is 0 without them; ``kb_terms`` needs ``held``, the knowledge
    base's chunk counts of ``absent.words(question)``, and is 1 without them. ``stems_of``:
    the candidates' stem sets, in order, where the store keeps them (``store.stem_sets``),
    whole or cut to ``pool_terms(question)``: every signal reads them only through those."""
    if not candidates:
        return Signals(0.0, 0.0, 0)
    top1 = max(c.cosine for c in candidates)
    mean = float(np.mean([c.cosine for c in context])) if context else 0.0
    dense = [c.cosine for c in candidates if c.dense_rank] or [c.cosine for c in candidates]
    units = evidence.context_sentences(context)
    pool = list(stems_of) if stems_of is not None else [chunk_stems(c.chunk) for c in candidates]
    cosine = (evidence.sentence_cosine(units, sentences, question_vector)
              if sentences is not None and question_vector is not None else 0.0)
    terms_of = _terms_of(candidates, pool)
    return Signals(float(top1), mean, len(context),
                   coverage(question, context, candidates, pool, terms_of),
                   float(np.mean(dense)), evidence.sentence_terms(question, units, pool, terms_of),
                   cosine, evidence.agreement(candidates),
                   1.0 if held is None else absent.kb_terms(question, held, pool))
