"""Whether the knowledge base holds the question's key terms at all: the ``kb_terms`` signal.

A thin question (on the collection's topic, asking a detail no document has) often names its
subject with a word the collection never uses: "Does cytisine work for quitting smoking?" in a
collection that describes varenicline, bupropion and e-cigarettes. Its chunks on quitting
smoking score like a covered question's, so cosines and the share of its words found in the
context cannot tell it; the absence of "cytisine" from *every* chunk can. No context sentence
can support a claim about a subject the knowledge base never names.

``kb_terms`` is the IDF-weighted share of the question's key terms (``evidence.key_terms``:
content-word stems, numbers and names weighing ``ENTITY_WEIGHT`` times) that at least one
chunk of the knowledge base holds, in [0, 1]; 1 when the question has no key terms or nothing
was looked up. The weights are those of ``sentence_terms`` (IDF over the retrieval's candidate
pool times the entity factor), so a term the knowledge base lacks, being in no candidate,
weighs the most: a question whose one rare word is absent scores low even when its common
words ("smoking", "quit") are everywhere.

Presence is asked of the store's keyword index (``Store.term_counts`` with a cap of 1: does
any chunk of this knowledge base hold the word, as keyword search would match it, stemmed by
the backend), counted over the whole knowledge base and cached by the store for its version;
the candidate pool is not enough, since a detail can sit in a chunk retrieval did not fetch.
Contractions of function words ("I'm", "what's", "don't", "won't", and "ive" or "isnt" typed
without the apostrophe) are not key terms (``sentences.key_word``): the keyword index splits
them into words nobody indexes. A possessive reads as its word, a name with an apostrophe
("O'Brien") whole. A number typed against its unit ("21mg") is two key terms, "21" and "mg",
each held where a chunk has it or "21mg".
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from citewise.answer import evidence
from citewise.sentences import spellings, stem


def terms(question: str) -> dict[str, list[str]]:
    """The question's key terms for ``kb_terms``: each stem with the question's words that
    give it (the words the store is asked about)."""
    out: dict[str, list[str]] = {}
    for whole, read in spellings(question):  # "21mg", read as "21" and "mg"
        for word in read:
            said = out.setdefault(stem(word), [])
            said.extend(w for w in dict.fromkeys((word, whole)) if w not in said)
    return out


def words(question: str) -> list[str]:
    """The words whose presence in the knowledge base ``kb_terms`` needs."""
    return list(dict.fromkeys(w for ws in terms(question).values() for w in ws))


def kb_terms(question: str, held: Mapping[str, int], pool: Sequence[frozenset[str]]) -> float:
    """The IDF-weighted share of the question's key terms that some chunk holds, in [0, 1].

    ``held`` maps each of ``words(question)`` to the number of chunks holding it (a capped
    count is enough: only zero matters); ``pool`` is the candidates' stem sets."""
    found = terms(question)
    if not found:
        return 1.0
    factors = evidence.key_terms(question)
    weights = {t: w * factors.get(t, 1.0) for t, w in evidence.idf(list(found), pool).items()}
    total = sum(weights.values())
    if total <= 0:
        return 1.0
    kept = sum(weights[t] for t, ws in found.items() if any(held.get(w, 0) > 0 for w in ws))
    return kept / total
