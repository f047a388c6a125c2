"""Common words of a large knowledge base (citewise/search/keywords.py): counted per knowledge base,
never all dropped, and small knowledge bases searched exactly as before. Pruning is for the
database's full-text search: the store here keeps no keyword index in memory
(``keyword_index_max_chunks=0``), except where a test says otherwise."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from citewise.errors import ConfigError
from citewise.kb import KBConfig, Retrieval
from citewise.search.keywords import KeywordQuery, plan
from citewise.search.retrieval import keyword_search
from citewise.stores.base import TermCounts
from citewise.stores.sql import SQLStore
from citewise.stores.sqlite import open_sqlite
from citewise.testing import config, document

# every knowledge base counts as large; a word in more than 2 of 20 chunks picks no candidates,
# in more than 6 of 20 it is left out
LARGE = Retrieval(keyword_min_chunks=0, keyword_rare_share=0.1, keyword_drop_share=0.3)


@pytest.fixture
def store(tmp_path: Path) -> SQLStore:
    s = open_sqlite(tmp_path / "k.db", keyword_index_max_chunks=0)
    yield s
    s.close()


def fill(store: SQLStore, name: str, texts: list[str]):
    kb = store.create_kb(name, config())
    store.put_document(kb, *document(f"{name}.md", *texts))
    return kb


def test_a_word_common_in_one_knowledge_base_is_kept_in_another(store: SQLStore) -> None:
    a = fill(store, "a", [f"cells sample{i}" for i in range(19)] + ["ferritin cells"])
    b = fill(store, "b", ["cells ferritin"] + [f"other{i} ferritin" for i in range(19)])
    assert plan(store, a, ["cells", "ferritin"], LARGE) == KeywordQuery(("ferritin",))
    assert plan(store, b, ["cells", "ferritin"], LARGE) == KeywordQuery(("cells",))
    found = store.chunks(b, [k for k, _ in keyword_search(store, b, "cells ferritin", LARGE)])
    assert [c.text for c in found.values()] == ["cells ferritin"]


def test_middling_words_score_but_pick_no_candidates(store: SQLStore) -> None:
    texts = ([f"iron serum{i}" for i in range(4)] + ["ferritin iron", "ferritin"]
             + [f"filler{i}" for i in range(14)])
    kb = fill(store, "kb", texts)
    q = plan(store, kb, ["iron", "ferritin", "iron"], LARGE)
    assert q == KeywordQuery(("iron", "ferritin"), ("ferritin",))
    hits = keyword_search(store, kb, "iron ferritin", LARGE)
    plain = dict(store.keyword(kb, ["iron", "ferritin"], 50))
    assert [store.chunks(kb, [k])[k].text for k, _ in hits] == ["ferritin iron", "ferritin"]
    assert [s for _, s in hits] == pytest.approx([plain[k] for k, _ in hits])


def test_the_rarest_word_is_kept_when_every_word_is_common(store: SQLStore) -> None:
    kb = fill(store, "kb", [f"cells blood {'ferritin' if i < 8 else ''}" for i in range(20)])
    assert plan(store, kb, ["cells", "ferritin", "blood"], LARGE) == KeywordQuery(("ferritin",))
    assert plan(store, kb, ["cells"], LARGE) == KeywordQuery(("cells",))  # one word: as asked
    assert len(keyword_search(store, kb, "cells blood", LARGE)) == 20


def test_an_in_memory_keyword_index_is_searched_as_written(tmp_path: Path) -> None:
    store = open_sqlite(tmp_path / "m.db", keyword_index_max_chunks=20)
    kb = fill(store, "kb", [f"cells blood {'ferritin' if i < 8 else ''}" for i in range(20)])
    big = fill(store, "big", [f"cells blood {'ferritin' if i < 8 else ''}" for i in range(21)])
    assert store.keyword_in_memory(kb) and not store.keyword_in_memory(big)
    words = ["cells", "ferritin", "blood"]
    assert plan(store, kb, words, LARGE) == KeywordQuery(tuple(words))
    assert plan(store, big, words, LARGE) == KeywordQuery(("ferritin",))
    assert len(keyword_search(store, kb, "cells blood", LARGE)) == 20
    store.close()


def test_the_ann_path_searches_keywords_in_the_database(tmp_path: Path) -> None:
    store = open_sqlite(tmp_path / "a.db", ann_min_chunks=3)
    small = fill(store, "small", ["cells blood", "ferritin"])
    large = fill(store, "large", ["cells blood", "ferritin", "iron"])
    assert store.keyword_in_memory(small) and not store.keyword_in_memory(large)
    assert len(store.keyword(large, ["ferritin", "iron"], 10)) == 2
    assert store.cache.held("keyword") == []  # the FTS5 search kept no index
    store.close()


def test_small_knowledge_bases_are_searched_as_written(store: SQLStore) -> None:
    kb = fill(store, "kb", [f"cells sample{i}" for i in range(19)] + ["ferritin cells"])
    default = Retrieval()
    assert store.count_chunks(kb) < default.keyword_min_chunks
    assert plan(store, kb, ["cells", "ferritin"], default) == KeywordQuery(("cells", "ferritin"))
    assert keyword_search(store, kb, "cells ferritin", default) == \
        store.keyword(kb, ["cells", "ferritin"], default.bm25_k)
    assert len(keyword_search(store, kb, "cells ferritin", default)) == 20


def test_counts_are_cached_per_version_and_cap() -> None:
    calls: list[tuple[str, int]] = []

    def count(term: str, cap: int) -> int:
        calls.append((term, cap))
        return min({"rare": 3, "common": 1000}[term], cap)

    cache = TermCounts()
    assert cache.get(1, 0, ["rare", "common"], 10, count) == {"rare": 3, "common": 10}
    assert cache.get(1, 0, ["rare", "common"], 5, count) == {"rare": 3, "common": 5}
    assert cache.get(1, 0, ["rare"], 50, count) == {"rare": 3}  # exact: answers any cap
    assert len(calls) == 2
    assert cache.get(1, 0, ["common"], 50, count) == {"common": 50}  # at its cap: counted again
    assert cache.get(1, 1, ["rare"], 10, count) == {"rare": 3}  # new version
    assert cache.get(2, 1, ["rare"], 10, count) == {"rare": 3}  # another knowledge base
    assert len(calls) == 5


def test_settings_are_checked_and_defaults_keep_old_gate_fingerprints() -> None:
    with pytest.raises(ConfigError, match="keyword_rare_share"):
        Retrieval(keyword_rare_share=0.5, keyword_drop_share=0.3).validate()
    with pytest.raises(ConfigError, match="keyword_min_chunks"):
        Retrieval(keyword_min_chunks=-1).validate()
    base = KBConfig(embedder="hashing:8", dim=8)
    assert base.fingerprint() == "471e1a760bfb66fb"  # as before these settings existed
    tuned = replace(base, retrieval=replace(base.retrieval, keyword_rare_share=0.1))
    assert tuned.fingerprint() != base.fingerprint()
