"""Which question words keyword search uses on a large knowledge base.

BM25 on every backend scores each chunk that holds any of the question's words, so its cost
grows with the chunks matching the *commonest* word: ``patients`` or ``cells`` in a
biomedical knowledge base of 200,000 chunks brings in tens of thousands of rows, most of them
ranked far below the top 50. On a knowledge base of at least ``keyword_min_chunks`` chunks,
``plan`` looks up how many of its chunks hold each word (capped counts, cached by the store
for the knowledge base's version) and

- leaves out a word held by more than ``keyword_drop_share`` of the chunks (its BM25 weight
  is near zero), unless every word is that common: then the rarest one is kept (found by
  uncapped counts);
- keeps a word held by more than ``keyword_rare_share`` of them in the score but not among
  the words that bring in candidates (``within``): only chunks holding at least one rarer word
  are ranked, by the BM25 of all kept words. A chunk holding none of the rarer words almost
  never reaches the top 50 (SciFact train: nDCG@10 unchanged at 0.05 of the chunks).

The counts are of this knowledge base's chunks alone, never of the whole store: a word common
in one tenant's knowledge base may be rare and decisive in another's. A knowledge base below
``keyword_min_chunks`` chunks, or a question of one word, is searched exactly as written, and
so is one whose keyword search the store serves from its in-memory index
(``store.keyword_in_memory``): there a common word costs one slice of an array, and pruning is
only for the database's full-text search.
"""

from __future__ import annotations

from dataclasses import dataclass

from citewise.kb import KnowledgeBase, Retrieval
from citewise.stores.roles import Answering


@dataclass(frozen=True)
class KeywordQuery:
    """The words to score and, when not None, the words of which a candidate holds one."""

    terms: tuple[str, ...]
    within: tuple[str, ...] | None = None


def plan(store: Answering, kb: KnowledgeBase, terms: list[str], s: Retrieval) -> KeywordQuery:
    unique = tuple(dict.fromkeys(terms))
    if len(unique) < 2 or store.keyword_in_memory(kb):
        return KeywordQuery(unique)
    chunks = store.count_chunks(kb)
    if chunks == 0 or chunks < s.keyword_min_chunks:
        return KeywordQuery(unique)
    drop, rare = s.keyword_drop_share * chunks, s.keyword_rare_share * chunks
    counts = store.term_counts(kb, list(unique), int(drop) + 1)
    kept = tuple(t for t in unique if counts[t] <= drop)
    if not kept:  # capped counts cannot tell the rarest: count these in full (cached as well)
        exact = store.term_counts(kb, list(unique), chunks)
        kept = (min(unique, key=exact.__getitem__),)
    within = tuple(t for t in kept if 0 < counts[t] <= rare)
    return KeywordQuery(kept, within if within and len(within) < len(kept) else None)
