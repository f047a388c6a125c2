"""The default generator: offline and extractive, it quotes the context and cites each quote.

Each sentence of the context is scored against the question by the cosine of their
embeddings (the sentence's vector read in its passage, see ``sentence_vectors.py``) and by
the IDF-weighted share of the question's content words it contains; the best sentence is
taken, with up to two more that score close to it and say something new. Sentences keep the
order of their passages and each carries its passage number, ``[n]``.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Sequence

import numpy as np

from ..embedders import Embedder
from ..embedders.base import embed_cached
from ..records import Candidate, Chunk, Draft
from ..sentences import split_sentences, stems
from .base import FALLBACK

MAX_SENTENCES = 3
NEAR_BEST = 0.8
DUPLICATE_OVERLAP = 0.6
MIN_WORDS = 4


_LIST_AFTER_COLON = re.compile(
    r":[ \t]*\n(?:[ \t]*\n)?((?:[ \t]*(?:[-*•+]|\d+[.)])[ \t]+[^\n]+\n?(?:[ \t]*\n)?)+)"
)
_ITEM = re.compile(r"^\s*(?:[-*•+]|\d+[.)])\s+", re.M)


def _units(text: str) -> list[str]:
    """Sentences to choose from: table rows stay rows, and a list introduced by a colon is
    joined to its introduction ("The schedule is: days 1 to 3, ...; day 8 onwards, ...")."""
    if text.lstrip().startswith("|"):
        return [row for row in text.splitlines() if row.strip()]

    def join(m: re.Match[str]) -> str:
        items = [i.strip().rstrip(".;") for i in _ITEM.split(m.group(1)) if i.strip()]
        return ": " + "; ".join(items) + ".\n\n"

    return split_sentences(_LIST_AFTER_COLON.sub(join, text))


def passage_units(chunk: Chunk) -> list[tuple[int, str, str]]:
    """The sentences of a passage the generator chooses from: (position, sentence, the
    sentence after its heading path, whose words are matched with the question's)."""
    heading = " › ".join(dict.fromkeys([chunk.title, *chunk.section]))
    return [(pos, sentence.strip(), f"{heading}: {sentence.strip()}")
            for pos, sentence in enumerate(_units(chunk.text))
            if len(sentence.split()) >= MIN_WORDS]


def _jaccard(a: set[str], b: set[str]) -> float:
    return len(a & b) / len(a | b) if a | b else 1.0


def _lexical(question_words: list[str], sentence_words: set[str], idf: dict[str, float]) -> float:
    total = sum(idf.get(w, 1.0) for w in set(question_words))
    if total == 0:
        return 0.0
    return sum(idf.get(w, 1.0) for w in set(question_words) if w in sentence_words) / total


class ExtractiveGenerator:
    name = "extractive"

    def __init__(self, embedder: Embedder) -> None:
        self.embedder = embedder

    def generate(self, question: str, context: Sequence[Candidate]) -> Draft:
        items: list[tuple[int, int, str]] = []  # (passage number, position, sentence)
        in_context: list[str] = []  # after its heading path, so its heading's words count too
        for n, cand in enumerate(context, 1):
            for pos, sentence, embedded in passage_units(cand.chunk):
                items.append((n, pos, sentence))
                in_context.append(embedded)
        if not items:
            return Draft(FALLBACK, self.name)
        words = [stems(s) for s in in_context]
        df = Counter(w for ws in words for w in ws)
        idf = {w: math.log(1 + len(items) / c) for w, c in df.items()}
        qwords = list(stems(question))
        # a sentence's vector is read in its passage, heading included, when the embedder
        # serves the stored contextual ones (``sentence_vectors.for_context``)
        sentences = [s for _, _, s in items]
        vectors = np.vstack([self.embedder.embed([question]), embed_cached(self.embedder, sentences)])
        cosines = vectors[1:] @ vectors[0]
        lexical = np.array([_lexical(qwords, ws, idf) for ws in words])
        # a small prior for the passage's rank in the context
        prior = np.array([0.02 * (len(context) - n) / max(len(context), 1) for n, _, _ in items])
        score = 0.6 * cosines + 0.4 * lexical + prior
        order = np.argsort(-score)
        best = float(score[order[0]])
        picked: list[int] = []
        for i in order:
            if len(picked) == MAX_SENTENCES or score[i] < NEAR_BEST * best:
                break
            bare = stems(items[i][2])
            if any(_jaccard(bare, stems(items[j][2])) > DUPLICATE_OVERLAP for j in picked):
                continue
            picked.append(int(i))
        picked.sort(key=lambda i: (items[i][0], items[i][1]))
        text = " ".join(f"{items[i][2]} [{items[i][0]}]" for i in picked)
        return Draft(text, self.name)
