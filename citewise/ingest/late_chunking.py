"""Contextual sentence vectors from one forward pass ("late chunking").

A chunk is run through the model once; its vector is the mean of all its token states, as a
sentence-transformers mean-pooling model gives (each piece of an overlong text pooled and
normalised, then the pieces averaged). A sentence's vector is the normalised mean of the
states of the tokens inside its character span, so it is read with everything around it in
the chunk (its heading included) at no extra cost.

``spans`` finds sentences in the chunk's text: exactly, then with white space folded (as
``split_sentences`` folds it), then word by word (a list the extractive generator joined to
its introduction). A text not found gets no span and is embedded on its own.
"""

from __future__ import annotations

import re
from bisect import bisect_left

import numpy as np

from citewise.embedders.base import normalise

Span = tuple[int, int]
_WORD = re.compile(r"\w+")
_SLACK = 4  # a word-by-word match may spread over at most this many times the text's length


def _folded(text: str) -> tuple[str, list[int]]:
    """``text`` without white space, and each kept character's index in ``text``."""
    at = [i for i, ch in enumerate(text) if not ch.isspace()]
    return "".join(text[i] for i in at), at


def _by_words(text: str, part: str, start: int) -> Span | None:
    found: list[Span] = []
    at = start
    for word in _WORD.findall(part):
        m = re.compile(rf"(?<!\w){re.escape(word)}(?!\w)").search(text, at)
        if m is None:
            return None
        found.append(m.span())
        at = m.end()
    if not found or found[-1][1] - found[0][0] > _SLACK * len(part) + 20:
        return None
    return found[0][0], found[-1][1]


def spans(text: str, parts: list[str]) -> list[Span | None]:
    """Each part's character span in ``text`` (parts in reading order), or None."""
    folded, index = _folded(text)
    out: list[Span | None] = []
    cursor = 0  # parts may overlap (a passage's sentences, then the passage), so only a hint
    for part in parts:
        part = part.strip()
        found: Span | None = None
        if part:
            i = text.find(part, cursor)
            i = i if i >= 0 else text.find(part)
            if i >= 0:
                found = (i, i + len(part))
            else:
                squeezed = _folded(part)[0]
                j = folded.find(squeezed, bisect_left(index, cursor))
                j = j if j >= 0 else folded.find(squeezed)
                if j >= 0:
                    found = (index[j], index[j + len(squeezed) - 1] + 1)
                else:
                    found = _by_words(text, part, cursor) or _by_words(text, part, 0)
        if found:
            cursor = found[0] + 1
        out.append(found)
    return out


def _special(offsets: np.ndarray) -> np.ndarray:
    return (offsets[:, 0] == 0) & (offsets[:, 1] == 0)


def pooled(states: np.ndarray, offsets: np.ndarray, name: str) -> np.ndarray:
    """The text's vector from its token states: each piece ([CLS] ... [SEP]) mean-pooled and
    normalised, then the pieces' mean, normalised (what the model's ``embed`` gives)."""
    special = _special(offsets)
    pieces: list[np.ndarray] = []
    start, inside = 0, False
    for i, s in enumerate(special):
        if s and not inside:
            start, inside = i, True
        elif s:
            pieces.append(states[start : i + 1].mean(axis=0))
            inside = False
    if not pieces:  # no special tokens: one piece
        pieces.append(states.mean(axis=0))
    each = normalise(np.stack(pieces), name)
    return normalise(each.mean(axis=0, keepdims=True), name)[0]


def span_means(states: np.ndarray, offsets: np.ndarray, wanted: list[Span | None],
               name: str) -> list[np.ndarray | None]:
    """Per span, the normalised mean of the states of the tokens inside it (special tokens
    never), or None for no span or a span without tokens."""
    special = _special(offsets)
    out: list[np.ndarray | None] = []
    for span in wanted:
        if span is None:
            out.append(None)
            continue
        inside = ~special & (offsets[:, 0] < span[1]) & (offsets[:, 1] > span[0])
        out.append(normalise(states[inside].mean(axis=0, keepdims=True), name)[0]
                   if inside.any() else None)
    return out
