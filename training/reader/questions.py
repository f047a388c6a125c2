"""Questions made by rule from sentences, so the reader learns what kind of answer a question
asks for (a duration, a frequency, an amount, a date, a way to do something), in words users
write rather than MedQuAD's templates.

A sentence holding such an answer becomes a question about its other words ("The battery
lasts 10 hours on a charge." -> "How long does the battery last on a charge?" in spirit:
"How long battery lasts charge?" in fact; the reader learns from the words, not the grammar).
Each question is paired with the sentence's window (ANSWERS), the same window with that
sentence cut out (NEITHER: the topic is there, the answer is not, the "thin" case), and a
window of the same document away from it (NEITHER).
"""

from __future__ import annotations

import random
import re

from citewise.reader.reading import windows

from .data import ANSWERS, NEITHER, Pair
from .synth import context

N = r"(?:\d+(?:\.\d+)?|one|two|three|four|five|six|seven|eight|ten|twelve|a few|several)"
KINDS: list[tuple[str, re.Pattern[str]]] = [
    ("How often", re.compile(rf"\b(?:every {N} \w+|{N} times (?:a|per) \w+|once a \w+|twice a \w+|"
                             r"daily|weekly|monthly|annually|each (?:day|week|month|year))\b")),
    ("How long", re.compile(rf"\b{N}(?:-| to | or ){N}? ?(?:seconds?|minutes?|hours?|days?|weeks?|"
                            rf"months?|years?)\b|\b{N} (?:seconds?|minutes?|hours?|days?|weeks?|"
                            r"months?|years?)\b")),
    ("How much", re.compile(r"(?:[$€£]\s?\d[\d,.]*|\b\d[\d,.]* ?(?:mg|g|kg|ml|mL|dollars|euros|percent|%))")),
    ("When", re.compile(r"\b(?:in|since|by|until|before|after) (?:(?:January|February|March|April|May|June|"
                        r"July|August|September|October|November|December) )?(?:19|20)\d\d\b")),
    ("How many", re.compile(r"\b(?:\d{1,6}|two|three|four|five|six|seven|eight|nine|ten) "
                            r"(?!seconds?|minutes?|hours?|days?|weeks?|months?|years?|percent)[a-z]{3,}s\b")),
]
HOW_TO = re.compile(r"^(?:To|In order to) ([a-z][^,]{3,70}), (.{10,})$")
STOP = set("a an the of in on at to for by with and or but is are was were be been being it its this that "
           "these those as from which who whom than then there their they we you your our can may might "
           "will would should could has have had do does did not no also such into about".split())


def topic(words: str, limit: int = 9) -> str:
    kept = [w for w in re.findall(r"[A-Za-z][\w-]*", words) if w.lower() not in STOP]
    return " ".join(kept[:limit])


def make_question(sentence: str, rng: random.Random) -> str | None:
    how = HOW_TO.match(sentence)
    if how:
        return rng.choice(["How do I", "How can I", "How to"]) + " " + how.group(1) + "?"
    for wh, pattern in KINDS:
        m = pattern.search(sentence)
        if m:
            rest = topic(sentence[: m.start()] + " " + sentence[m.end():])
            if len(rest.split()) >= 2:
                return f"{wh} {rest.lower() if rng.random() < 0.5 else rest}?"
    return None


def question_pairs(documents: list[list[str]], count: int, rng: random.Random) -> list[Pair]:
    """About ``count`` pairs: a third asked and answered, two thirds asked and not answered."""
    pairs: list[Pair] = []
    usable = [d for d in documents if len(d) >= 3]
    tries = 0
    while len(pairs) < count and tries < count * 200:
        tries += 1
        doc = rng.choice(usable)
        i = rng.randrange(len(doc))
        question = make_question(doc[i], rng)
        if not question:
            continue
        pairs.append(Pair(question, context(doc, i, rng), ANSWERS, "question"))
        rest = doc[:i] + doc[i + 1:]
        j = max(0, min(i - 1, len(rest) - 1))
        cut = context(rest, j, rng)
        if make_question_free(cut, question):
            pairs.append(Pair(question, cut, NEITHER, "question-cut"))
        far = [w for w in windows(" ".join(doc[i + 3:] or doc[: max(0, i - 2)]))]
        if far and make_question_free(far[0], question):
            pairs.append(Pair(question, far[0], NEITHER, "question-near"))
    return pairs


def make_question_free(window: str, question: str) -> bool:
    """Whether ``window`` holds no answer of the question's kind (so NEITHER is its label)."""
    wh = next((w for w, _ in KINDS if question.startswith(w + " ")), None)
    if wh is None:
        return not HOW_TO.search(window)
    pattern = dict(KINDS)[wh]
    return not pattern.search(window)
