"""The default generator: offline and extractive, it quotes the context and cites each quote.

It chooses among the context's citable units (``units.split_units``: sentences, list items,
table rows with their header), each scored against the question by

    0.6 x cosine     of their embeddings (the unit's vector read in its passage, heading
                     included, see ``sentence_vectors.py``)
  + 0.4 x lexical    the IDF-weighted share of the question's words the unit holds, its
                     heading path's words included; a word that frames the question rather
                     than names its topic ("does it cause", "how long", "what happens") counts
                     half; a unit that refers back (below) or a list item holds the words of
                     the unit it refers to, or of its list's introduction, at half weight
  + 0.08 x lexical   when the question asks for a quantity (how many / long / soon / likely,
                     what dose, when, does it cause ...) and the unit holds a number, or the
                     unit holds the numbers the question names
  + 0.2 x passage    the cosine of the unit's passage with the question (from retrieval)

The best unit is taken, then those scoring at least 0.8 of it (0.65 for the unit right after
one taken, in the same passage) that say something new, up to three sentences in all (a list,
with its introduction, counts as one). What a unit needs is quoted with it (``needs``):

- a unit whose subject is a pronoun ("It ...", "In clinical trials it ...", "For this
  reason ...", "Such events ...") needs the unit before it in its passage, and that one, if it
  too starts so, the one before it; a unit with nothing to refer to is never quoted;
- an introduction ending in a colon needs its list ("The standard adult schedule is:" and its
  items), and a list item its introduction.

A passage's units keep their order, passages come in the order of their best unit, and each
unit carries its passage number, ``[n]``; the draft is written with ``units.join``, so list
items stay items and table rows stay rows under their header.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from citewise.answer.support import numbers
from citewise.embedders import Embedder
from citewise.embedders.base import embed_cached
from citewise.generators.base import FALLBACK
from citewise.ingest.units import is_item, is_table, join, split_units
from citewise.records import Candidate, Chunk, Draft
from citewise.sentences import stem, stems, words

MAX_SENTENCES = 3
NEAR_BEST = 0.8
NEAR_NEXT = 0.65  # for the unit right after one taken, in the same passage
DUPLICATE_OVERLAP = 0.6
MIN_WORDS = 4
MAX_CHAIN = 2  # units a pronoun may reach back over
MAX_LIST = 10  # items an introduction may carry
CARRY = 0.5  # weight of the words of the unit before, for a unit that follows on from it
NUMBER_BONUS = 0.08  # times the lexical share: a number counts as much as the unit is on topic
FRAME_WEIGHT = 0.5
PASSAGE_WEIGHT = 0.2
# chosen on the sample's train questions (benchmarks/key_facts.py --split train)

PRONOUNS = frozenset("it its they their them this these those he she his her him such".split())
# words that may stand before a subject pronoun in the first words of a sentence:
# "In clinical trials it ...", "Because it was ...", "For this reason ...", "Over the weeks they ..."
OPENERS = frozenset(
    """in after before during for with at by within over since on under among from because
    although though while when if as so but and yet thus therefore also then there here once
    until unless whereas however instead""".split()
)
PRONOUN_REACH = 5  # a pronoun counts as the subject within the first words only
# words that frame a question rather than name its topic ("does it cause", "what happens",
# "how long"): matched at ``FRAME_WEIGHT``
FRAME = frozenset(stem(w) for w in """
    cause causes caused help helps work works use used using take taken taking make makes get
    gets need needs happen happens happened mean means good idea way thing things someone
    somebody person people anyone long soon much many often likely far quickly fast common
    right best usually typically really actually""".split())
QUANTITY = re.compile(
    r"\b(how (many|much|long|soon|often|likely|far|quickly|fast|common|old|big|high|low)"
    r"|what (dose|doses|dosage|strength|percentage|proportion|share|rate|age|number|amount|limit)"
    r"|at what (point|age|dose|time)|which (day|days|dose|doses|year|strength)|when|dosed|dose"
    r"|maximum|minimum|limit|risk|chance|odds|rate)\b"
    # does it cause / is it safe: how often, how large, is the answer
    r"|^(does|do|can|could|will|is|are)\b.*\b(cause|causes|risk|safe|harm|harmful|side effects?)\b",
    re.I,
)
_MARKER = re.compile(r"^\s*(?:[-*•+]|\d+[.)])\s+")


def refers_back(unit: str) -> bool:
    """Whether ``unit``'s subject is a pronoun pointing to what came before it: the first
    word ("It contains ...", "These changes ...", "Such events ..."), or a word within the
    first few after an opening preposition or conjunction ("In clinical trials it affected
    ...", "For this reason ...", "Because it was ...")."""
    if is_table(unit):
        return False
    ws = words(_MARKER.sub("", unit))
    for i, w in enumerate(ws[:PRONOUN_REACH]):
        if w in PRONOUNS:
            return i == 0 or ws[0] in OPENERS
    return False


def introduces(unit: str) -> bool:
    """Whether ``unit`` introduces what follows it ("The standard adult schedule is:")."""
    return not is_table(unit) and not is_item(unit) and unit.rstrip().endswith(":")


def passage_units(chunk: Chunk) -> list[tuple[int, str, str]]:
    """The units of a passage the generator chooses from: (position, unit, the unit after
    its heading path, whose words are matched with the question's)."""
    heading = " › ".join(dict.fromkeys([chunk.title, *chunk.section]))
    return [(pos, unit, f"{heading}: {unit}")
            for pos, unit in enumerate(split_units(chunk.text))
            if len(words(unit)) >= MIN_WORDS]


def _list_start(units: Sequence[str], pos: int) -> int:
    """The position of the first item of the list that item ``pos`` belongs to."""
    while pos > 0 and is_item(units[pos - 1]):
        pos -= 1
    return pos


def _reach_back(units: Sequence[str], pos: int) -> int | None:
    """The first position unit ``pos``'s pronoun needs quoted before it (``pos`` itself when
    it has none), or None when the chain runs past the passage's start or ``MAX_CHAIN``."""
    start = pos
    while refers_back(units[start]):
        if start == 0 or pos - start >= MAX_CHAIN:
            return None
        start -= 1
    return start


def needs(units: Sequence[str], pos: int) -> list[int] | None:
    """The positions quoted when unit ``pos`` of a passage is (itself included, in order), or
    None when it cannot be quoted: a pronoun reaches back past the passage's start or further
    than ``MAX_CHAIN`` units, or it introduces a list too long to quote."""
    start = _reach_back(units, pos)
    if start is None:
        return None
    out = set(range(start, pos + 1))
    if is_item(units[pos]):  # an item is quoted under its list's introduction
        first = _list_start(units, pos)
        if first > 0 and introduces(units[first - 1]):
            intro = _reach_back(units, first - 1)
            if intro is None:
                return None
            out.update(range(intro, first))
    elif introduces(units[pos]):
        end = pos + 1
        while end < len(units) and is_item(units[end]) and end - pos <= MAX_LIST:
            end += 1
        if end == pos + 1 or (end < len(units) and is_item(units[end])):
            return None  # an introduction without its list, or with a list too long to quote
        out.update(range(pos, end))
    return sorted(out)


def _jaccard(a: set[str], b: set[str]) -> float:
    return len(a & b) / len(a | b) if a | b else 1.0


def _lexical(weights: dict[str, float], unit_words: set[str], before: set[str]) -> float:
    """The weighted share of the question's words in a unit (those of the unit before it,
    ``before``, at ``CARRY``)."""
    total = sum(weights.values())
    if total == 0:
        return 0.0
    return sum(v * (1.0 if w in unit_words else CARRY if w in before else 0.0)
               for w, v in weights.items()) / total


def _before(units: Sequence[str], pos: int) -> set[str]:
    """The words a unit carries from the one before it: a pronoun's, or a list introduction's
    for its items."""
    if pos == 0:
        return set()
    if refers_back(units[pos]):
        return stems(units[pos - 1])
    if is_item(units[pos]):
        start = _list_start(units, pos)
        if start > 0 and introduces(units[start - 1]):
            return stems(units[start - 1])
    return set()


def _number_bonus(question: str, unit: str) -> float:
    """Extra score (0 to 1) for a unit holding the numbers a question names, or any number
    when it asks for a quantity."""
    asked = {v for v, _ in numbers(question)}
    have = {v for v, _ in numbers(_MARKER.sub("", unit))}
    if asked:
        return len(asked & have) / len(asked)
    return 1.0 if have and QUANTITY.search(question) else 0.0


@dataclass(frozen=True)
class Unit:
    """A unit the generator chooses from."""

    n: int  # passage number in the context
    pos: int  # position among the passage's units
    text: str
    embedded: str  # after its heading path


class ExtractiveGenerator:
    name = "extractive"

    def __init__(self, embedder: Embedder) -> None:
        self.embedder = embedder

    def scored(self, question: str, context: Sequence[Candidate]
               ) -> tuple[dict[int, list[str]], list[Unit], np.ndarray]:
        """Every passage's units (by passage number), the units chosen from, and their scores."""
        every = {n: split_units(c.chunk.text) for n, c in enumerate(context, 1)}
        items = [Unit(n, pos, text, embedded) for n, cand in enumerate(context, 1)
                 for pos, text, embedded in passage_units(cand.chunk)]
        if not items:
            return every, items, np.zeros(0)
        words_of = [stems(u.embedded) for u in items]
        df = Counter(w for ws in words_of for w in ws)
        idf = {w: math.log(1 + len(items) / c) for w, c in df.items()}
        # each of the question's words by its IDF in the context; a framing word for less
        weights = {w: idf.get(w, 1.0) * (FRAME_WEIGHT if w in FRAME else 1.0) for w in stems(question)}
        # a unit's vector is read in its passage, heading included, when the embedder serves
        # the stored contextual ones (``sentence_vectors.for_context``)
        vectors = np.vstack([self.embedder.embed([question]),
                             embed_cached(self.embedder, [u.text for u in items])])
        cosines = vectors[1:] @ vectors[0]
        lexical = np.array([_lexical(weights, ws, _before(every[u.n], u.pos))
                            for u, ws in zip(items, words_of, strict=True)])
        # a number counts as much as the unit is on the question's topic
        bonus = NUMBER_BONUS * lexical * np.array([_number_bonus(question, u.text) for u in items])
        # a small prior for the passage's rank in the context
        prior = np.array([0.02 * (len(context) - u.n) / max(len(context), 1) for u in items])
        passage = np.array([context[u.n - 1].cosine for u in items])
        return every, items, 0.6 * cosines + 0.4 * lexical + bonus + prior + PASSAGE_WEIGHT * passage

    def generate(self, question: str, context: Sequence[Candidate]) -> Draft:
        every, items, score = self.scored(question, context)
        if not items:
            return Draft(FALLBACK, self.name)
        order = np.argsort(-score, kind="stable")
        best = float(score[order[0]])
        chosen: dict[tuple[int, int], float] = {}  # (passage, position) -> the score it came with
        taken: list[set[str]] = []
        picks, grew = 0, True
        while grew:  # again while a unit taken lets the one after it in
            grew = False
            for i in order:
                if score[i] < NEAR_NEXT * best:
                    break
                u = items[i]
                follows = (u.n, u.pos - 1) in chosen
                if (u.n, u.pos) in chosen or score[i] < (NEAR_NEXT if follows else NEAR_BEST) * best:
                    continue
                group = needs(every[u.n], u.pos)
                if group is None:
                    continue
                bare = stems(u.text)
                if any(_jaccard(bare, t) > DUPLICATE_OVERLAP for t in taken):
                    continue
                new = [p for p in group if (u.n, p) not in chosen]
                cost = _cost(every[u.n], new, [p for n, p in chosen if n == u.n])
                if picks and picks + cost > MAX_SENTENCES:
                    continue  # too long; an item of a list already quoted may still come
                chosen.update({(u.n, p): float(score[i]) for p in new})
                taken.append(bare)
                picks += cost
                grew = True
        if not chosen:
            return Draft(FALLBACK, self.name)
        # passages in the order of the best unit taken from each, each in its own order
        first = {n: max(v for (m, _), v in chosen.items() if m == n) for n, _ in chosen}
        keys = sorted(chosen, key=lambda k: (-first[k[0]], k))
        return Draft(join([f"{every[n][p]} [{n}]" for n, p in keys], [n for n, _ in keys]), self.name)


def _cost(units: Sequence[str], new: list[int], have: list[int]) -> int:
    """What quoting ``new`` (positions of one passage) adds to the answer's length, counted in
    sentences: each prose unit one, a list (its items and introduction) one in all, and a list
    already begun nothing more."""
    lists = {_list_start(units, p) for p in new if is_item(units[p])}
    begun = {_list_start(units, p) for p in have if is_item(units[p])}
    intros = {start - 1 for start in lists}
    prose = [p for p in new if not is_item(units[p]) and p not in intros]
    return len(prose) + len(lists - begun)


def from_spec(arg: str, embedder: Embedder) -> ExtractiveGenerator:
    """``extractive``: quotes the passages' own sentences; offline, the default."""
    return ExtractiveGenerator(embedder)
