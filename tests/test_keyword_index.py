"""The in-memory BM25 index (citewise/stores/keyword_index.py) and the byte-budgeted cache it
lives in (citewise/stores/kb_cache.py), without a store."""

from __future__ import annotations

import json
import math
import re
import unicodedata
from dataclasses import dataclass

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from citewise.search.retrieval import keyword_terms
from citewise.stores.kb_cache import KBCache
from citewise.stores.keyword_index import build, index_terms, raw_words


def rows(*texts: str, title: str = "", section: tuple[str, ...] = ()) -> list[tuple]:
    return [(10 + i, title, json.dumps(list(section)), t) for i, t in enumerate(texts)]


def bm25(tf: int, df: int, n: int, length: int, mean: float) -> float:
    """FTS5's BM25 of one term, written out."""
    idf = max(math.log((n - df + 0.5) / (df + 0.5)), 1e-6)
    return idf * tf * 2.2 / (tf + 1.2 * (0.25 + 0.75 * length / mean))


def test_scores_are_bm25_over_the_knowledge_base_alone() -> None:
    texts = ("ferritin iron ferritin", "iron deficiency anaemia in the elderly", "spleen",
             "cells", "blood")
    index = build(rows(*texts), version=3)
    lengths = [3, 6, 1, 1, 1]  # every word counts in a chunk's length, stop words too
    mean = sum(lengths) / 5
    hits = index.search(["ferritin", "iron"], 10)
    assert [key for key, _ in hits] == [10, 11]
    first = bm25(2, 1, 5, 3, mean) + bm25(1, 2, 5, 3, mean)
    assert hits[0][1] == pytest.approx(first, rel=1e-5)
    assert hits[1][1] == pytest.approx(bm25(1, 2, 5, 6, mean), rel=1e-5)
    assert index.version == 3 and index.nbytes > 0
    assert index.search(["ferritin"], 0) == [] and index.search(["the", "zyzzyva"], 10) == []


def test_a_word_in_most_chunks_weighs_almost_nothing_but_still_matches() -> None:
    index = build(rows("cells a", "cells b", "cells c", "other"), version=0)
    hits = index.search(["cells"], 10)
    assert [k for k, _ in hits] == [10, 11, 12]  # ties by key
    assert all(0 < score < 1e-5 for _, score in hits)


def test_question_and_chunk_words_are_split_alike() -> None:
    text = "Dosing: Ünïcödé tablets (0.5 mg), don't; naïve-patients' doses"
    index = build(rows(text), version=0)
    for question in ("dose of tablets", "unicode", "naive patient", "0.5 mg dosing", "patients'"):
        terms = keyword_terms(question)
        assert index.search(terms, 5), (question, terms)
    assert index_terms("Doses DOSING dosed") == ["dose", "dose", "dose"]
    assert index_terms("0.5 mg, don't, patient's") == ["0", "5", "mg", "patient"]  # as FTS5 splits
    assert index_terms("the and of") == []


@settings(max_examples=400, deadline=None)
@given(st.text(alphabet=st.characters(codec="utf-8"), max_size=60)
       | st.text(alphabet="aé\u0301\u00bd\ufb01\u3002\u4e00 _-.'2\u00a0\u2028", max_size=30))
def test_words_are_split_as_the_folded_text_s_letter_and_digit_runs(text: str) -> None:
    """The one-table split (``_SPLIT``) is the definition it replaced: lower case, NFKD,
    combining marks dropped, then every run of ``[^\\W_]``."""
    folded = unicodedata.normalize("NFKD", text.lower())
    folded = "".join(c for c in folded if not unicodedata.combining(c))
    assert raw_words(text) == re.findall(r"[^\W_]+", folded)


def test_title_and_headings_are_indexed() -> None:
    index = build(rows("body text", title="Varenicline", section=("Adverse effects",)), version=0)
    assert index.search(["varenicline"], 5) == index.search(["adverse"], 5) != []


def test_within_restricts_the_candidates_not_the_scores() -> None:
    index = build(rows("cells ferritin", "cells cells iron", "ferritin iron", "cells", "nothing"),
                  version=0)
    plain = dict(index.search(["cells", "ferritin", "iron"], 10))
    within = index.search(["cells", "ferritin", "iron"], 10, within=["ferritin"])
    assert sorted(k for k, _ in within) == [10, 12]
    assert all(score == pytest.approx(plain[k]) for k, score in within)
    assert index.search(["cells"], 10, within=["zyzzyva"]) == []


def test_counts_are_of_chunks_holding_the_term_as_search_matches_it() -> None:
    index = build(rows("dosing cells", "doses", "cells 0.5 mg", "nothing"), version=0)
    assert [index.count(t, 10) for t in ("dose", "cells", "0.5", "zyzzyva", "the")] == [2, 2, 1, 0, 0]
    assert index.count("5", 10) == 1 and index.count("0.6", 10) == 0
    assert index.count("dose", 1) == 1  # capped
    assert index.count("cells-dosing", 10) == 1  # a term of two words: chunks holding both


def test_an_empty_knowledge_base_has_an_empty_index() -> None:
    index = build([], version=1)
    assert index.search(["anything"], 10) == [] and len(index.keys) == 0


@dataclass(frozen=True)
class Entry:
    version: int
    nbytes: int


def test_the_cache_keeps_to_its_budget_least_recently_used_out() -> None:
    cache = KBCache(limit_bytes=100)
    built: list[tuple[str, int]] = []

    def fetch(kind: str, kb: int, version: int = 0, size: int = 40) -> Entry:
        def make() -> Entry:
            built.append((kind, kb))
            return Entry(version, size)

        return cache.fetch(kind, kb, version, make)

    fetch("dense", 1)
    fetch("keyword", 1)
    fetch("dense", 1)  # a hit: now the most recent
    fetch("keyword", 2)  # 120 > 100: the least recently used (keyword of 1) goes
    assert cache.held("keyword") == [2] and cache.held("dense") == [1]
    assert cache.used == 80
    fetch("keyword", 2, version=1)  # a new version is a miss, replacing the old entry
    assert cache.used == 80 and built[-1] == ("keyword", 2)
    fetch("dense", 3, size=500)  # over the whole budget alone: kept, everything else out
    assert cache.held("dense") == [3] and cache.held("keyword") == []
    stats = {s.kind: s for s in cache.stats()}
    assert (stats["dense"].hits, stats["dense"].misses, stats["dense"].evictions) == (1, 2, 1)
    assert (stats["keyword"].hits, stats["keyword"].misses, stats["keyword"].evictions) == (0, 3, 2)
    assert stats["dense"].bytes == 500 and stats["keyword"].entries == 0
    cache.forget(3)
    assert cache.used == 0 and cache.held("dense") == []


def test_the_chunk_table_is_charged_to_the_index_entry() -> None:
    from dataclasses import replace

    from citewise.records import Chunk
    from citewise.stores.chunk_table import TableBuilder

    texts = ["x" * 5_000, "varenicline dose", "Ünïcödé " * 100]
    full = [(10 + i, "doc", i, json.dumps(["Part", "Sub"]), t, "Title", f"id{i}")
            for i, t in enumerate(texts)]
    table = TableBuilder()
    index = build(table.rows(full), version=1)
    plain = build(rows(*texts, title="Title", section=("Part", "Sub")), version=1)
    assert plain.vocab == index.vocab and (plain.weights == index.weights).all()
    kept = replace(index, table=table.table())
    assert kept.nbytes - index.nbytes >= 5_000 + 100 * 8  # the texts, at least
    got = kept.table.chunks([12, 10, 99, 11]) if kept.table else {}
    assert got == {i: Chunk("doc", i - 10, ("Part", "Sub"), texts[i - 10], "Title")
                   for i in (12, 10, 11)}
    assert got[10].section is got[11].section  # a heading path is held once
    assert kept.table and kept.table.by_id("id2") == got[12] and kept.table.by_id("id3") is None


def test_the_table_keeps_the_gates_stems_of_each_chunk() -> None:
    from citewise.answer import evidence
    from citewise.stores.chunk_table import TableBuilder

    texts = ["Doses were titrated; dosing twice daily (0.5 mg).", "Patients' nausea", ""]
    full = [(10 + i, "doc", i, json.dumps(["Dosing", "Adults"]), t, "Guide", f"id{i}")
            for i, t in enumerate(texts)]
    table = TableBuilder()
    list(table.rows(full))
    kept = table.table()
    want = [evidence.chunk_stems(c) for c in kept.records]
    every = frozenset().union(*want) | {"absent"}
    assert kept.stem_sets([10, 11, 12], every) == want
    assert kept.stem_sets([12, 10], every) == [want[2], want[0]]
    assert "0.5" in want[0] and "dos" in want[0]  # the gate's light stemmer, not Porter's
    asked = {"dos", "nause", "absent"}  # cut to the terms asked about
    assert kept.stem_sets([10, 11, 12], asked) == [w & asked for w in want]
    assert kept.stem_sets([10, 99], asked) is None and kept.stem_sets([], asked) == []
