"""Sentence splitting that survives clinical text, and the word lists shared by lexical code.

A period ends a sentence only when it is followed by white space and then something that can
start a sentence (a capital, a digit, a quote or bracket), and the token before it is not a
known abbreviation (Dr., et al., Fig., i.e., b.i.d., approx., vs.), an initial (J. Smith) or
part of a number (0.5 mg never reaches the rule, having no space after its point).

``stems`` and ``split_sentences`` remember their answers for the last ``TEXT_CACHE`` texts
(each caller gets its own copy): every question reads its context's passages through the gate,
the extractive generator and the citation check, and the same passages come back question
after question, so a server spent more of its CPU per question re-splitting and re-stemming
them than retrieving them.

Splitting text, one way for each purpose:

- ``split_sentences`` (here): prose into sentences, the rule above; the lowest level, which
  the others build on;
- ``ingest.units.split_units``: a passage into its citable units (sentences, list items,
  table rows with their header): what an answer quotes, what the check and the gate read;
- ``answer.support.units``: those units and the whole passage, what a drafted sentence may
  be supported by;
- ``answer.evidence.context_sentences``: every context chunk's units, with their chunk;
- ``ingest.markdown``: a document into sections by its headings, before chunking;
- ``reader.reading.windows``: a passage into windows of at most 45 words for the reader.
"""

from __future__ import annotations

import re
from functools import lru_cache

ABBREVIATIONS = frozenset(
    """
    dr mr mrs ms prof sr jr st vs etc al fig figs eq eqs ref refs vol vols pp approx ca cf
    e.g i.e b.i.d t.i.d q.i.d q.d p.o i.v i.m s.c h.s p.r.n dept univ inc ltd corp jan feb
    mar apr jun jul aug sep sept oct nov dec u.s u.k e.u n.b viz resp tab tabs suppl
    """.split()
)

TEXT_CACHE = 16_384  # texts per cache (passages and their sentences: a few MB)
_BOUNDARY = re.compile(r"(?<=[.!?])[\"')\]]*\s+(?=[\"'(\[]?[A-Z0-9])")

STOP_WORDS = frozenset(
    """
    a about above after again against all am an and any are as at be because been before being
    below between both but by can could did do does doing down during each few for from further
    had has have having he her here hers herself him himself his how i if in into is it its
    itself just me more most my myself no nor not of off on once only or other our ours
    ourselves out over own same she should so some such than that the their theirs them
    themselves then there these they this those through to too under until up very was we were
    what when where which while who whom why will with would you your yours yourself
    yourselves s t don now also may might must shall us many much
    ive isnt arent wasnt werent dont doesnt didnt hasnt havent hadnt cant couldnt wont
    wouldnt shouldnt youre youve youll theyre theyve weve thats whats
    """.split()
)  # the last two lines: contractions as people type them without an apostrophe ("im" is
# not one of them: in clinical text it is IM, intramuscular)

# units a number is often typed against ("21mg", "0.5ml", "8h") where the documents write
# "21 mg": the number and its unit are read as two words, as they are when spaced
UNITS = "mg|mcg|ug|g|kg|ml|l|mm|cm|km|h|hr|hrs|min|mins|ppm|iu|mmol|kcal|lb|lbs|oz|mmhg"
_PLAIN_WORD = re.compile(r"[a-z0-9]+(?:[.'][a-z0-9]+)*")
_WORD = re.compile(rf"\d+(?:\.\d+)?(?=(?:{UNITS})\b)|{_PLAIN_WORD.pattern}")
_CONTRACTED = frozenset(("s", "m", "ve", "re", "ll", "d", "t"))


def words(text: str, units: bool = True) -> list[str]:
    """Lower-cased word tokens, keeping decimals (0.5) and contractions together; a number
    typed against its unit ("21mg") is two words, as "21 mg" is. ``units=False`` keeps it one,
    as the keyword index and the databases' full-text search split a document's words."""
    return (_WORD if units else _PLAIN_WORD).findall(text.lower())


def key_word(word: str) -> str:
    """A word as the lexical signals read it: "" for a contraction of a function word ("i'm",
    "don't", "what's", "it's": the keyword index splits them into stop words); a possessive
    as its word ("patch's" -> "patch"); a name with an apostrophe whole ("o'brien")."""
    head, apostrophe, tail = word.partition("'")
    if not apostrophe:
        return word
    if word.endswith("n't") or (tail in _CONTRACTED and head in STOP_WORDS):
        return ""
    return head if tail in _CONTRACTED else word


def content_words(text: str, units: bool = True) -> list[str]:
    """Words that carry meaning, as ``key_word`` reads them: stop words and contractions of
    function words removed, possessives read as their word, order and duplicates kept;
    ``units`` as for ``words``."""
    return [k for w in words(text, units) if (k := key_word(w)) and k not in STOP_WORDS]


def spellings(text: str) -> list[tuple[str, list[str]]]:
    """Each content word as the text writes it, with the words it reads as: "21mg" with "21"
    and "mg" (a document may write either), any other word with itself. For the look-ups that
    meet a document's words as written (keyword search, ``absent.kb_terms``)."""
    return [(whole, content_words(whole) or [whole]) for whole in content_words(text, units=False)]


_SUFFIXES = ("ations", "ation", "ings", "ing", "edly", "ed", "ies", "es", "s", "ly")


@lru_cache(maxsize=1 << 16)
def stem(word: str) -> str:
    """A light suffix stripper (dosed, doses, dosing -> dos): enough to match word forms.
    Remembered per word: the gate stems every sentence of every context again for each
    question, and a collection's words repeat."""
    for suffix in _SUFFIXES:
        if word.endswith(suffix) and len(word) - len(suffix) >= 3 and not word[-len(suffix) - 1].isdigit():
            word = word[: -len(suffix)]
            break
    return word.rstrip("e") if len(word) > 3 else word


def stems(text: str) -> set[str]:
    """The distinct stems of ``text``'s content words (each distinct word stemmed once)."""
    return set(_stems(text))


@lru_cache(maxsize=TEXT_CACHE)
def _stems(text: str) -> frozenset[str]:
    return frozenset(map(stem, set(content_words(text))))


def stem_set(title: str, section: tuple[str, ...], text: str) -> frozenset[str]:
    """The stems of a chunk as retrieval indexes it (title, headings, text): what the gate
    reads of each candidate (``evidence.chunk_stems``, or kept with the store's chunk table)."""
    return frozenset(stems(" ".join((title, *section, text))))


def _is_abbreviation(token: str) -> bool:
    """Whether ``token`` (the last word before a period, the period included) is an
    abbreviation or an initial rather than the end of a sentence."""
    token = token.rstrip(".").lstrip("(\"'[").lower()
    if token in ABBREVIATIONS:
        return True
    # single letters are initials (J. Smith) or list markers (a.)
    return len(token) == 1 and token.isalpha()


_BLOCKS = re.compile(r"\n\s*\n|\n(?=\s*(?:[-*•+]|\d+[.)])\s)")
_BULLET = re.compile(r"^(?:[-*•+]|\d+[.)])\s+")


def split_sentences(text: str) -> list[str]:
    """Split ``text`` into sentences; white space inside a sentence is folded to one space.

    Blank lines and list items always end a sentence; a leading list marker is dropped.
    """
    return list(_sentences(text))


@lru_cache(maxsize=TEXT_CACHE)
def _sentences(text: str) -> tuple[str, ...]:
    return tuple(s for block in _BLOCKS.split(text) for s in _split_block(block))


def _split_block(text: str) -> list[str]:
    text = _BULLET.sub("", " ".join(text.split()))
    if not text:
        return []
    sentences: list[str] = []
    start = 0
    for m in _BOUNDARY.finditer(text):
        end = m.start()  # just after the [.!?]
        # the token before it starts after the last space (text holds single spaces only);
        # looked up backwards from ``end``, so a run of abbreviations stays linear
        token_start = max(start, text.rfind(" ", start, end) + 1)
        if text[end - 1] == "." and _is_abbreviation(text[token_start:end]):
            # "et al." and "e.g." end a token, not a sentence; "etc." before a capital is ambiguous
            # and kept joined, which errs on the side of longer sentences.
            continue
        sentences.append(text[start : m.end()].strip())
        start = m.end()
    tail = text[start:].strip()
    if tail:
        sentences.append(tail)
    return sentences
