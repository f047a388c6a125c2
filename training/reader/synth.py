"""Synthetic claim pairs made from any corpus, as published for factual-consistency checkers
(FactCC, Kryscinski et al. 2020): a sentence, lightly edited, is checked against the window of
text it came from.

- supported (ANSWERS): the sentence itself with light edits that keep its meaning (a
  parenthesis or an opening connective dropped);
- contradicted (CONTRADICTS): negation inserted or removed, a direction word flipped, a number
  changed, a time unit swapped;
- unsupported (NEITHER): a word of the sentence swapped for one from another document, or a
  sentence of another document.
"""

from __future__ import annotations

import random
import re

from citewise.reader.reading import WINDOW_WORDS

from .data import ANSWERS, CONTRADICTS, NEITHER, Pair

CONNECTIVES = re.compile(r"^(However|Moreover|In addition|Additionally|Furthermore|Also|Thus|Therefore|"
                         r"In contrast|Overall|Finally|Similarly|Notably),\s+")
NEGATABLE = [(r"\b(is|are|was|were|can|could|may|might|should|will|would|has been|have been)\b(?! not)",
              r"\1 not"), (r"\bdoes not\b", "does"), (r"\bdo not\b", "do"), (r"\bdid not\b", "did"),
             (r"\b(is|are|was|were|can|may|will) not\b", r"\1"), (r"\bcannot\b", "can")]
FLIPS = {"increase": "decrease", "increases": "decreases", "increased": "decreased",
         "decrease": "increase", "decreases": "increases", "decreased": "increased",
         "higher": "lower", "lower": "higher", "more": "less", "less": "more",
         "reduces": "raises", "reduced": "raised", "improves": "worsens", "improved": "worsened",
         "before": "after", "after": "before", "positive": "negative", "negative": "positive",
         "common": "rare", "rare": "common", "always": "never", "never": "always",
         "required": "optional", "allowed": "forbidden", "inhibits": "promotes", "promotes": "inhibits"}
UNITS = ["seconds", "minutes", "hours", "days", "weeks", "months", "years"]
NUMBER = re.compile(r"\b\d+(?:\.\d+)?\b")
WORD = re.compile(r"\b[A-Za-z][a-z]{4,}\b")


def context(sentences: list[str], i: int, rng: random.Random) -> str:
    """Sentence ``i`` with neighbours around it, at most ``WINDOW_WORDS`` words in all."""
    lo = hi = i
    words = len(sentences[i].split())
    while True:
        grown = False
        for j in ([lo - 1, hi + 1] if rng.random() < 0.5 else [hi + 1, lo - 1]):
            if 0 <= j < len(sentences) and words + len(sentences[j].split()) <= WINDOW_WORDS:
                words += len(sentences[j].split())
                lo, hi = min(lo, j), max(hi, j)
                grown = True
        if not grown or rng.random() < 0.3:
            break
    return " ".join(sentences[lo:hi + 1])


def paraphrase(sentence: str) -> str | None:
    edited = CONNECTIVES.sub("", re.sub(r"\s*\([^()]{1,60}\)", "", sentence))
    edited = edited[:1].upper() + edited[1:]
    return edited if edited != sentence else None


def negate(sentence: str, rng: random.Random) -> str | None:
    options = [(p, r) for p, r in NEGATABLE if re.search(p, sentence)]
    if not options:
        return None
    pattern, repl = rng.choice(options)
    return re.sub(pattern, repl, sentence, count=1)


def flip(sentence: str, rng: random.Random) -> str | None:
    found = [w for w in re.findall(r"\b[a-z]+\b", sentence) if w in FLIPS]
    if not found:
        return None
    word = rng.choice(found)
    return re.sub(rf"\b{word}\b", FLIPS[word], sentence, count=1)


def renumber(sentence: str, rng: random.Random) -> str | None:
    numbers = [m for m in NUMBER.finditer(sentence) if not re.fullmatch(r"(19|20)\d\d", m.group())]
    units = [u for u in UNITS if re.search(rf"\b{u}\b", sentence)]
    if units and (not numbers or rng.random() < 0.3):
        unit = rng.choice(units)
        return re.sub(rf"\b{unit}\b", rng.choice([u for u in UNITS if u != unit]), sentence, count=1)
    if not numbers:
        return None
    m = rng.choice(numbers)
    value = float(m.group())
    new = value * rng.choice([2, 3, 0.5, 10]) + rng.choice([0, 1, 5])
    text = f"{new:g}" if "." in m.group() else str(int(round(new)))
    if text == m.group():
        return None
    return sentence[: m.start()] + text + sentence[m.end():]


def swap(sentence: str, other: str, rng: random.Random) -> str | None:
    ours = WORD.findall(sentence)
    theirs = [w for w in WORD.findall(other) if w.lower() not in sentence.lower()]
    if not ours or not theirs:
        return None
    return re.sub(rf"\b{re.escape(rng.choice(ours))}\b", rng.choice(theirs), sentence, count=1)


def synthetic_pairs(documents: list[list[str]], count: int, rng: random.Random) -> list[Pair]:
    """``count`` pairs, about a third of each label, from documents given as sentence lists."""
    pairs: list[Pair] = []
    usable = [d for d in documents if len(d) >= 2]
    while len(pairs) < count:
        doc = rng.choice(usable)
        i = rng.randrange(len(doc))
        sentence = doc[i]
        if not 6 <= len(sentence.split()) <= 40:
            continue
        window = context(doc, i, rng)
        other = rng.choice(usable)
        roll = rng.random()
        if roll < 0.34:
            claim, label, kind = paraphrase(sentence) or sentence, ANSWERS, "synth-same"
        elif roll < 0.67:
            edit = rng.choice([negate, flip, renumber])
            claim, label, kind = edit(sentence, rng), CONTRADICTS, f"synth-{edit.__name__}"
        elif roll < 0.84:
            claim, label, kind = swap(sentence, " ".join(other), rng), NEITHER, "synth-swap"
        else:
            claim, label, kind = rng.choice(other), NEITHER, "synth-other"
        if claim and claim != window:
            pairs.append(Pair(claim, window, label, kind))
    return pairs
