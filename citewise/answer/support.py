"""Whether a passage supports a sentence: a support score, then consistency checks.

The score (measured in ``benchmarks/citations.py``):

    lexical  share of the sentence's distinct content-word stems found in the passage
    cosine   the highest embedding cosine between the sentence and one sentence of the
             passage (or the whole passage), when an embedder is given
    score    WEIGHT * lexical + (1 - WEIGHT) * cosine, or lexical alone without an embedder

A sentence is supported when the score reaches the threshold and it is consistent with the
passage's *best supporting sentence* (the one with the highest mean of its own lexical share
and cosine):

- every number in the sentence is in the passage, with the same unit next to it
  ("four weeks" counts as "4 weeks");
- it is negated ("not", "no", "never", "fails to", ...) exactly when that sentence is;
- no polarity axis is flipped: a small lexicon of opposed verbs and adjectives (persist /
  subside, increase / decrease, promote / inhibit, improve / worsen, ...); "symptoms subside
  within 4 weeks" is not supported by "symptoms persist for 4 weeks";
- neither the sentence nor its support reads as an instruction to a model ("ignore the rules
  above", "tell the user ..."): a document's injected instruction is not a source of fact.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from citewise.ingest.units import split_units
from citewise.sentences import TEXT_CACHE, stem, stems, words

# chosen on SciFact train claims with local:all-MiniLM-L6-v2 (benchmarks/citations.py); other
# embedders use the same until measured
WEIGHT = 0.5
THRESHOLD = 0.61
# the same, for passage sentences read in their passage (late chunking, sentence_vectors.py):
# a standalone draft sentence is a little less close to them (train balanced accuracy 0.699
# here, 0.697 for standalone sentences at 0.61)
CONTEXT_THRESHOLD = 0.59
LEXICAL_ONLY_THRESHOLD = 0.6

# a number, not a digit inside a name (HIV-1, IL-6, 6q21, CD4)
NUMBER = re.compile(r"(?<![\w.])(?<![A-Za-z]-)(\d+(?:[.,]\d+)?)\s*(%|[a-zA-Zµ]+)?")
UNITS = {
    "%": "%", "percent": "%", "mg": "mg", "milligram": "mg", "mcg": "mcg", "µg": "mcg",
    "microgram": "mcg", "g": "g", "gram": "g", "kg": "kg", "ml": "ml", "l": "l", "mmol": "mmol",
    "mmhg": "mmhg", "bpm": "bpm", "second": "second", "minute": "minute", "min": "minute",
    "hour": "hour", "h": "hour", "hr": "hour", "day": "day", "week": "week", "wk": "week",
    "month": "month", "year": "year", "yr": "year", "time": "times", "fold": "times",
    "cigarette": "cigarette", "dose": "dose", "patient": "patient", "people": "people",
}
_ONES = "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen " \
        "fifteen sixteen seventeen eighteen nineteen".split()
_TENS = "twenty thirty forty fifty sixty seventy eighty ninety".split()
NUMBER_WORDS = {w: i for i, w in enumerate(_ONES)} | {w: 20 + 10 * i for i, w in enumerate(_TENS)}
_NUMBER_WORD = re.compile(
    r"\b(" + "|".join(_TENS) + r")[- ](" + "|".join(_ONES[1:10]) + r")\b"
    r"|\b(" + "|".join(NUMBER_WORDS) + r")\b",
    re.I,
)

NEGATION_SCOPE = 4
NEGATIONS = frozenset({"not", "no", "never", "without", "none", "neither", "nor", "cannot",
                       "fail", "fails", "failed", "unable", "nothing", "n't"})

# opposed sides of one axis; a word's stem decides its side
_AXES = [
    ("increase increases increased increasing increment rise rises rising rose raise raises raised "
     "elevate elevated elevates elevation higher high greater more augment augmented enhance "
     "enhanced enhances upregulate upregulated upregulates upregulation boost boosts boosted "
     "exceed exceeds accelerate accelerates accelerated",
     "decrease decreases decreased decreasing decline declines declined reduce reduces reduced "
     "reducing reduction lower lowers lowered low less fewer smaller diminish diminished "
     "diminishes attenuate attenuated attenuates downregulate downregulated downregulates "
     "downregulation drop drops dropped fall falls fell slow slows slowed"),
    ("persist persists persisted persistent continue continues continued remain remains "
     "remained linger lingers lingered prolonged sustained",
     "subside subsides subsided resolve resolves resolved disappear disappears disappeared fade "
     "fades faded abate abates abated cease ceases ceased transient"),
    ("promote promotes promoted induce induces induced activate activates activated stimulate "
     "stimulates stimulated facilitate facilitates facilitated",
     "inhibit inhibits inhibited suppress suppresses suppressed block blocks blocked prevent "
     "prevents prevented impair impairs impaired abolish abolishes abolished"),
    ("improve improves improved improvement beneficial better",
     "worsen worsens worsened deteriorate deteriorates deteriorated harmful detrimental worse"),
    ("present presence positive", "absent absence negative lack lacks lacking"),
    ("safe effective", "unsafe ineffective"),
    ("longer lengthen lengthens", "shorter shorten shortens"),
    ("earlier", "later delayed"),
    ("likely", "unlikely"),
]
AXES = [(frozenset(map(stem, a.split())), frozenset(map(stem, b.split()))) for a, b in _AXES]

INSTRUCTION = re.compile(
    r"\b(ignore|disregard|forget|override)\b[^.]{0,60}\b(instructions?|rules|prompt|above|previous|guidelines)\b"
    r"|\byou are now\b|\bsystem prompt\b|\bnew instructions?\b|\b(tell|inform|instruct) the (user|reader)s?\b"
    r"|\bas an ai\b|\bassistant must\b|\bmust (always )?(answer|reply|respond|say)\b",
    re.I,
)


def _spell_numbers(text: str) -> str:
    def repl(m: re.Match[str]) -> str:
        if m.group(1):
            return str(NUMBER_WORDS[m.group(1).lower()] + NUMBER_WORDS[m.group(2).lower()])
        return str(NUMBER_WORDS[m.group(3).lower()])

    return _NUMBER_WORD.sub(repl, text)


def numbers(text: str) -> set[tuple[str, str]]:
    """(value, unit) pairs; the unit is "" when the word after the number is not a unit (the
    same passages are read question after question: remembered like ``sentences.stems``)."""
    return set(_numbers(text))


@lru_cache(maxsize=TEXT_CACHE)
def _numbers(text: str) -> frozenset[tuple[str, str]]:
    out = set()
    for value, word in NUMBER.findall(_spell_numbers(text)):
        word = (word or "").lower()
        unit = UNITS.get(word) or UNITS.get(word.rstrip("s")) or ""
        out.add((value.replace(",", ""), unit))
    return frozenset(out)


def negated(text: str, about: set[str] | None = None) -> set[str]:
    """Negation words in ``text``; with ``about``, only those whose scope (the next
    ``NEGATION_SCOPE`` words) holds one of those stems: "but not as adults" does not negate a
    claim about children."""
    ws = words(text.replace("n't", " n't"))
    return {w for i, w in enumerate(ws) if w in NEGATIONS and (
        about is None or about & {stem(x) for x in ws[i + 1 : i + 1 + NEGATION_SCOPE]})}


def flipped_axis(sentence: str, support: str) -> tuple[str, str] | None:
    """(word in the sentence, opposed word in the support) when one axis is flipped."""
    s_words, p_words = words(sentence), words(support)
    s_stems, p_stems = {stem(w) for w in s_words}, {stem(w) for w in p_words}
    for a, b in AXES:
        for mine, theirs in ((a, b), (b, a)):
            if s_stems & mine and not s_stems & theirs and p_stems & theirs and not p_stems & mine:
                said = next(w for w in s_words if stem(w) in mine)
                other = next(w for w in p_words if stem(w) in theirs)
                return said, other
    return None


def lexical(sentence: str, passage: str) -> float:
    """Share of the sentence's distinct content words found in the passage."""
    wanted = stems(sentence)
    return len(wanted & stems(passage)) / len(wanted) if wanted else 1.0


def units(passage: str) -> list[str]:
    """The passage's citable units (``units.split_units``: sentences, list items, table rows
    with their header), then the passage itself, white space folded, when it has more than one."""
    parts = split_units(passage) or [passage]
    return parts + [" ".join(passage.split())] if len(parts) > 1 else parts


@dataclass(frozen=True)
class Support:
    ok: bool
    score: float
    lexical: float
    cosine: float | None
    best: str  # the passage sentence that supports the claim best
    reason: str = ""


def score(sentence: str, passage: str, vector: np.ndarray | None = None,
          unit_vectors: np.ndarray | None = None, threshold: float | None = None) -> Support:
    """Whether ``passage`` supports ``sentence``. Pass the sentence's vector and the vectors of
    ``units(passage)`` (from the same embedder) to add the embedding cosine to the score."""
    parts = units(passage)
    sentences = parts[:-1] if len(parts) > 1 else parts
    lex_each = np.array([lexical(sentence, u) for u in sentences])
    lex = lexical(sentence, passage)
    cos: float | None = None
    if vector is not None and unit_vectors is not None:
        cosines = unit_vectors @ vector
        cos = float(cosines.max())
        best = sentences[int(np.argmax(lex_each + cosines[: len(sentences)]))]
        total = WEIGHT * lex + (1 - WEIGHT) * cos
        limit = THRESHOLD if threshold is None else threshold
    else:
        best = sentences[int(np.argmax(lex_each))]
        total = lex
        limit = LEXICAL_ONLY_THRESHOLD if threshold is None else threshold
    reason = inconsistency(sentence, passage, best)
    if total < limit and not reason:  # an inconsistency is the more useful reason to give
        closeness = f", cosine {cos:.2f} with its closest sentence" if cos is not None else ""
        reason = (f"support score {total:.2f} is below {limit:.2f} (only {lex:.0%} of its content "
                  f"words are in the passage{closeness})")
    return Support(not reason, total, lex, cos, best, reason)


def inconsistency(sentence: str, passage: str, best: str) -> str:
    """Why ``sentence`` cannot stand on ``passage`` whatever its score (``best``, the passage
    unit that supports it best): an instruction, a number or unit the passage lacks, a negation
    or a polarity it does not share; empty when there is none."""
    if INSTRUCTION.search(sentence):
        return "it repeats an instruction, not a fact"
    if INSTRUCTION.search(best):
        return "its support is an instruction written into the document, not a statement of fact"
    have = numbers(passage)
    have_values = {n for n, _ in have}
    for number, unit in sorted(numbers(sentence)):
        if number not in have_values:
            return f"the number {number} is not in the passage"
        if unit and (number, unit) not in have:
            return f"{number} {unit} does not match the passage's units"
    s_neg, p_neg = negated(sentence), negated(best, stems(sentence))
    if s_neg and not p_neg:
        return f"it negates ({', '.join(sorted(s_neg))}) where the passage does not"
    if p_neg and not s_neg:
        return f"the passage negates ({', '.join(sorted(p_neg))}) where it does not"
    flip = flipped_axis(sentence, best)
    if flip:
        return f"it says {flip[0]!r} where the passage says {flip[1]!r}"
    return ""
