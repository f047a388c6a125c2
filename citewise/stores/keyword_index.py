"""BM25 over one knowledge base, in memory: the keyword side of every store below
``keyword_index_max_chunks`` chunks (``search_rows.py`` builds it from the store and keeps it
in the ``KBCache`` for the knowledge base's version).

The database's full-text search ranks thousands of matching rows per question (InnoDB FULLTEXT
~80 ms at 50,000 chunks); here each question term is one slice of a term-major posting array
whose BM25 weights were computed at build time, so a search is a ``bincount`` over the
question's postings and an ``argpartition`` for the top k.

What is indexed of a chunk is what every backend's full-text index holds (``keyword_body``:
title, headings, text). Words are Unicode letter-and-digit runs, as FTS5's ``unicode61``
splits them (``0.5`` is two words, ``patient's`` is ``patient`` and ``s``), lower-cased,
diacritics removed, stop words dropped, and stemmed by the Porter algorithm (PyStemmer), as
FTS5's ``porter`` tokenizer does; the question's terms are split the same way, so query and
index always agree. A term of several words counts as each of them in a search (FTS5 asks for
the phrase) and as all of them in ``count``. So which question words a knowledge base holds
(``term_counts``, read by the gate's ``kb_terms``) is what FTS5 says but for a word whose stem
is a stop word's (``whats``): on the sample's 317 labelled questions, 1 word of 1,690.
Scores are BM25 as FTS5 computes it (k1 1.2, b 0.75, idf ``log((N - n + 0.5) / (n + 0.5))``
floored at 1e-6, a chunk's length counted in all its words) but over this knowledge base's
chunks alone: N, n and the mean length are never the file's or another tenant's.

On SciFact's 300 test claims (``benchmarks/scifact.py --keyword-parity``) nDCG@10 is FTS5's:
BM25 alone 0.6845 here against 0.6841, hybrid 0.7276 against 0.7285. On a store of the same
abstracts with hashing vectors, citewise's light stemmer instead of Porter's put BM25 0.007
below FTS5, no stemming 0.019 below.
"""

from __future__ import annotations

import json
import re
import threading
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass
from itertools import count
from typing import Any

import numpy as np

from citewise.sentences import STOP_WORDS
from citewise.stores.base import top_k
from citewise.stores.chunk_table import ChunkTable

K1, B = 1.2, 0.75
IDF_FLOOR = 1e-6  # FTS5's, for a word in more than half of the chunks
TERM_BYTES = 120  # a vocabulary entry's memory beyond its characters (str object, dict slot)

_WORD = re.compile(r"[^\W_]+")
_stemmers = threading.local()  # a PyStemmer stemmer is not to be shared between threads
# below U+3000 (Latin, Greek, Cyrillic, ..., punctuation) one table splits the folded text:
# a combining mark is dropped, a letter or digit kept, anything else becomes a space
_TABLE_END = 0x3000
_SPLIT = [None if unicodedata.combining(chr(cp)) else cp if chr(cp).isalnum() else 32
          for cp in range(_TABLE_END)]
STEMS_HELD = 1 << 17  # raw words whose stems the process remembers (~20 MB at most)


def stem(word: str) -> str:
    """Porter's stem of ``word`` (``dosing``, ``doses`` -> ``dose``); ``_stems`` remembers it."""
    stemmer = getattr(_stemmers, "porter", None)
    if stemmer is None:
        import Stemmer

        stemmer = _stemmers.porter = Stemmer.Stemmer("porter")
    return str(stemmer.stemWord(word))


def raw_words(text: str) -> list[str]:
    """Lower case without diacritics (``Ünïcödé`` -> ``unicode``), as FTS5's unicode61 folds,
    split into runs of letters and digits: by one ``translate`` where every character is in
    ``_SPLIT`` (a regular expression took twice as long), else by ``_WORD``."""
    text = text.lower()
    if not text.isascii():
        text = unicodedata.normalize("NFKD", text)
        if max(text) >= chr(_TABLE_END):
            return _WORD.findall("".join(c for c in text if not unicodedata.combining(c)))
    return text.translate(_SPLIT).split()


class _Stems(dict[str, str]):
    """Raw word -> its stem ("" for a stop word), for every build of the process: looked up
    from C by ``map``, so a word is stemmed in Python once, not once per knowledge base. At
    ``STEMS_HELD`` words it starts again (it only saves time; it holds no knowledge base's
    data that a search reads)."""

    def __missing__(self, word: str) -> str:
        found = "" if word in STOP_WORDS else stem(word)
        if len(self) >= STEMS_HELD:
            self.clear()
        self[word] = found
        return found


_stems = _Stems()


def index_terms(text: str) -> list[str]:
    """The indexed terms of ``text``, in order: what a question's term is split into too."""
    return [s for s in map(_stems.__getitem__, raw_words(text)) if s]


@dataclass(frozen=True)
class KeywordIndex:
    """Row ``i`` is chunk ``keys[i]``; term ``vocab[t]``'s postings are
    ``rows[indptr[c]:indptr[c+1]]`` with their BM25 weights in ``weights``; ``table`` holds
    the chunks' records when they were read with the index (``chunk_table.py``)."""

    keys: np.ndarray  # int64, ascending
    vocab: dict[str, int]
    indptr: np.ndarray  # int64, len(vocab) + 1
    rows: np.ndarray  # int32, ascending within a term
    weights: np.ndarray  # float32
    version: int
    chars: int = 0  # characters of the vocabulary, for ``nbytes``
    table: ChunkTable | None = None

    @property
    def nbytes(self) -> int:
        arrays = self.keys.nbytes + self.indptr.nbytes + self.rows.nbytes + self.weights.nbytes
        table = self.table.nbytes if self.table is not None else 0
        return arrays + self.chars + TERM_BYTES * len(self.vocab) + table

    def search(self, terms: list[str], k: int, within: list[str] | None = None
               ) -> list[tuple[int, float]]:
        """The ``k`` best chunks for an OR of ``terms`` (each distinct term counted once, as in
        FTS5's query), best first, ties by key; with ``within``, only chunks holding one of
        those terms are ranked, each by its score over all of ``terms``."""
        cols = self._columns(terms)
        if not cols or k <= 0:
            return []
        rows = np.concatenate([self.rows[self.indptr[c] : self.indptr[c + 1]] for c in cols])
        weights = np.concatenate([self.weights[self.indptr[c] : self.indptr[c + 1]] for c in cols])
        if within is None:
            held = set(cols)
        else:
            held = set(self._columns([t for t in dict.fromkeys(within) if t in terms]))
            if not held:
                return []
        candidates: np.ndarray
        scores: np.ndarray
        if len(cols) == 1:
            candidates, scores = rows, weights.astype(np.float64)
        else:  # every weight is above 0, so the chunks holding a term are the nonzero sums
            total = np.bincount(rows, weights=weights, minlength=len(self.keys))
            if held == set(cols):
                candidates = np.flatnonzero(total)
            else:
                mask = np.zeros(len(self.keys), dtype=bool)
                for c in held:
                    mask[self.rows[self.indptr[c] : self.indptr[c + 1]]] = True
                candidates = np.flatnonzero(mask)
            scores = total[candidates]
        best = top_k(scores, k)
        return [(int(self.keys[candidates[i]]), float(scores[i])) for i in best]

    def count(self, term: str, cap: int) -> int:
        """Chunks holding ``term`` (all of its words, when it splits into several), up to
        ``cap``: ``Store.term_counts`` where this index serves the knowledge base's keywords."""
        words = index_terms(term)
        if not words or any(word not in self.vocab for word in words):
            return 0
        cols = [self.vocab[word] for word in words]
        held = self.rows[self.indptr[cols[0]] : self.indptr[cols[0] + 1]]
        for col in cols[1:]:
            held = np.intersect1d(held, self.rows[self.indptr[col] : self.indptr[col + 1]])
        return min(len(held), cap)

    def _columns(self, terms: list[str]) -> list[int]:
        """One column per indexed word of each distinct term (a term of two words counts both)."""
        cols = []
        for term in dict.fromkeys(terms):
            for word in index_terms(term):
                col = self.vocab.get(word)
                if col is not None:
                    cols.append(col)
        return cols


def build(rows: Iterable[tuple[Any, ...]], version: int) -> KeywordIndex:
    """The index of chunk rows ``(key, title, section json, text)`` in ascending key order."""
    keys: list[int] = []
    lengths: list[int] = []
    stems: list[str] = []  # every chunk's stems, one after another ("": a stop word)
    for key, title, section, text in rows:
        words = raw_words("\n".join([title, *json.loads(section), text]))
        stems.extend(map(_stems.__getitem__, words))
        keys.append(int(key))
        lengths.append(len(words))
    vocab = dict(zip((s for s in dict.fromkeys(stems) if s), count()))  # in first-seen order
    column = {**vocab, "": -1}
    cols = np.fromiter(map(column.__getitem__, stems), dtype=np.int64, count=len(stems))
    row_of = np.repeat(np.arange(len(keys), dtype=np.int64), lengths)
    kept = cols >= 0
    return _assemble(keys, vocab, cols[kept], row_of[kept],
                     np.asarray(lengths, dtype=np.float64), version)


def _assemble(keys: list[int], vocab: dict[str, int], col_of: np.ndarray, row_of: np.ndarray,
              lengths: np.ndarray, version: int) -> KeywordIndex:
    """Term-major postings with their BM25 weights, from each word's (column, row)."""
    n, terms = len(keys), len(vocab)
    pair, tf = np.unique(col_of * max(n, 1) + row_of, return_counts=True)  # sorted: term, row
    cols, rows = pair // max(n, 1), pair % max(n, 1)
    df = np.bincount(cols, minlength=terms).astype(np.float64)
    idf = np.maximum(np.log((n - df + 0.5) / (df + 0.5)), IDF_FLOOR) if n else df
    norm = K1 * (1 - B + B * lengths / (lengths.mean() if n and lengths.mean() > 0 else 1.0))
    weights = idf[cols] * tf * (K1 + 1) / (tf + norm[rows])
    indptr = np.zeros(terms + 1, dtype=np.int64)
    np.cumsum(df.astype(np.int64), out=indptr[1:])
    return KeywordIndex(np.asarray(keys, dtype=np.int64), vocab, indptr, rows.astype(np.int32),
                        weights.astype(np.float32), version, sum(map(len, vocab)))


__all__ = ["KeywordIndex", "build", "index_terms"]
