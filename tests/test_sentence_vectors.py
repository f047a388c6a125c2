"""Sentence vectors embedded at ingest: questions read them instead of embedding passages."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from citewise.answer import sentence_vectors
from citewise.embedders import base as embedders_base
from citewise.embedders import get_embedder
from citewise.embedders.hashing import HashingEmbedder
from citewise.engine import Engine
from citewise.generators.extractive import passage_units
from citewise.kb import GateSetting
from citewise.records import Answer
from citewise.stores.sentence_rows import SentenceVectors, text_key
from citewise.stores.sqlite import open_sqlite
from citewise.telemetry.replay import build_shadow
from tests.helpers import SAMPLE, SAMPLE_QUERIES

QUESTION = "How long do nicotine withdrawal symptoms last?"


@pytest.fixture
def embedded(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every text the hashing embedder is asked to embed from now on (the cache emptied)."""
    seen: list[str] = []
    real = HashingEmbedder.embed

    def spy(self: HashingEmbedder, texts: list[str], *, progress: bool = False) -> np.ndarray:
        seen.extend(texts)
        return real(self, texts, progress=progress)

    monkeypatch.setattr(HashingEmbedder, "embed", spy)
    monkeypatch.setattr(embedders_base, "_cache", type(embedders_base._cache)())
    return seen


def outcome(result: object) -> tuple:
    if isinstance(result, Answer):
        return ("answered", result.text, tuple(c.chunk_id for c in result.citations), result.dropped)
    return ("refused", result.path, result.reason)  # type: ignore[attr-defined]


def built(path: Path, sentences: bool = True, embedder: str = "hashing:256") -> Engine:
    """The sample collection, its gate open to every question (so every one is answered or
    refused by the citation check)."""
    engine = Engine(open_sqlite(path))
    kb = engine.open_kb("s", embedder=embedder)
    gate = GateSetting("top1", 0.0, kb.config.embedder, kb.config.fingerprint(), "calibrated")
    kb = engine.store.update_kb("s", replace(kb.config, gate=gate))
    engine.ingest(kb, [SAMPLE], sentences=sentences)
    return engine


def ask_all(engine: Engine, questions: list[str]) -> list[tuple]:
    kb = engine.store.get_kb("s")
    embedders_base._cache.clear()
    return [outcome(engine.ask(kb, q)) for q in questions]


QUESTIONS = [json.loads(line)["query"] for line in
             (SAMPLE_QUERIES / "smoking-cessation.test.jsonl").read_text().splitlines()][:30]


def test_ingest_stores_every_text_a_question_would_embed(engine: Engine, embedded: list[str]) -> None:
    kb = engine.open_kb("s", embedder="hashing:256")
    engine.ingest(kb, [SAMPLE])
    chunk = engine.store.chunks(kb, [int(engine.store.dense_index(kb).keys[0])]).popitem()[1]
    stored = engine.store.sentence_vectors(kb, [chunk.id])[chunk.id]
    wanted = sentence_vectors.texts(chunk)
    assert stored.keys == tuple(text_key("hashing:256", t) for t in wanted)
    np.testing.assert_array_equal(stored.vectors, get_embedder("hashing:256").embed(wanted))
    embedded.clear()
    result = engine.ask(kb, QUESTION)
    assert isinstance(result, Answer) and result.citations
    assert embedded == [QUESTION]  # for retrieval; every passage sentence came from the store


def test_an_embedder_without_token_states_embeds_each_text_once(engine: Engine,
                                                                embedded: list[str]) -> None:
    calls: list[list[str]] = []
    real = HashingEmbedder.embed

    def spy(self: HashingEmbedder, texts: list[str], *, progress: bool = False) -> np.ndarray:
        calls.append(list(texts))
        return real(self, texts, progress=progress)

    kb = engine.open_kb("s", embedder="hashing:256")
    with pytest.MonkeyPatch.context() as m:
        m.setattr(HashingEmbedder, "embed", spy)
        engine.ingest(kb, [SAMPLE])
    chunks = engine.store.chunks(kb, [int(k) for k in engine.store.dense_index(kb).keys]).values()
    wanted = {c.embed_text for c in chunks} | {t for c in chunks for t in sentence_vectors.texts(c)}
    assert {t for call in calls for t in call} == wanted
    assert all(len(set(call)) == len(call) for call in calls)  # once each per batch
    # a sentence is no longer embedded a second time after its heading path
    assert not {e for c in chunks for _, _, e in passage_units(c)} & set(embedded)
    assert not sentence_vectors.contextual(get_embedder("hashing:256"))


@pytest.mark.heavy
def test_answers_are_the_same_with_and_without_stored_sentences(tmp_path: Path,
                                                                embedded: list[str]) -> None:
    without = built(tmp_path / "without.db", sentences=False)
    embedded.clear()
    before = ask_all(without, QUESTIONS)
    on_demand = len(embedded)
    stored = built(tmp_path / "with.db")
    embedded.clear()
    assert ask_all(stored, QUESTIONS) == before
    # the questions, once each: the extractive draft quotes units exactly as stored (a table
    # row with its header, a list item), so no draft sentence is embedded
    assert embedded == QUESTIONS
    assert len(QUESTIONS) < on_demand
    kb = stored.store.get_kb("s")
    chunks = stored.store.chunks(kb, [int(k) for k in stored.store.dense_index(kb).keys]).values()
    assert not {t for c in chunks for t in sentence_vectors.texts(c)} & set(embedded)
    assert sum(o[0] == "answered" for o in before) >= 20
    # and the citation check finds each quoted unit in its passage: nothing is dropped
    assert not any(o[0] == "answered" and o[3] for o in before)


def test_chunks_without_sentence_vectors_are_embedded_on_demand(tmp_path: Path,
                                                                embedded: list[str]) -> None:
    engine = built(tmp_path / "mixed.db")
    kb = engine.store.get_kb("s")
    result = engine.ask(kb, QUESTION)
    assert isinstance(result, Answer)
    cited = engine.store.chunk_by_id(kb, result.citations[0].chunk_id)
    # that chunk's document written again without sentence vectors (as an older caller does)
    doc = next(d for d in engine.store.list_documents(kb) if d.doc_id == cited.doc_id)
    store = engine.store
    store.db.conn.execute("UPDATE documents SET content_hash = 'old' WHERE kb_id = ? AND doc_id = ?",
                     (kb.id, doc.doc_id))
    engine.ingest(kb, [SAMPLE / doc.doc_id], sentences=False)
    assert store.sentence_vectors(kb, [cited.id]) == {}
    embedded.clear()
    embedders_base._cache.clear()
    again = engine.ask(kb, QUESTION)
    assert outcome(again) == outcome(result)
    assert set(sentence_vectors.texts(cited)) & set(embedded)  # its sentences, embedded now


def test_vectors_of_another_embedder_are_never_served(tmp_path: Path, embedded: list[str],
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    reference = ask_all(built(tmp_path / "ref.db", sentences=False), QUESTIONS[:10])
    real = SentenceVectors.build.__func__  # type: ignore[attr-defined]

    def stale(cls: type, embedder: str, texts: list[str], vectors: np.ndarray,
              dtype: str = "f4") -> SentenceVectors:
        return real(cls, "other:256", texts, np.ones_like(vectors), dtype)

    with monkeypatch.context() as m:  # rows from another embedder of the same dimension
        m.setattr(SentenceVectors, "build", classmethod(stale))
        engine = built(tmp_path / "stale.db")
    kb = engine.store.get_kb("s")
    keys = [int(k) for k in engine.store.dense_index(kb).keys]
    ids = [c.id for c in engine.store.chunks(kb, keys).values()]
    assert len(engine.store.sentence_vectors(kb, ids)) == len(ids)
    assert ask_all(engine, QUESTIONS[:10]) == reference


def test_switching_embedder_drops_them_and_answers_on_the_new_one(tmp_path: Path) -> None:
    engine = built(tmp_path / "switch.db")
    kb = engine.store.get_kb("s")
    keys = [int(k) for k in engine.store.dense_index(kb).keys]
    ids = [c.id for c in engine.store.chunks(kb, keys).values()]
    assert len(engine.store.sentence_vectors(kb, ids)) == len(ids)
    build_shadow(engine.store, kb, get_embedder("hashing:128"))
    config = replace(kb.config, embedder="hashing:128", dim=128)
    config = replace(config, gate=replace(config.gate, embedder=config.embedder,
                                          fingerprint=config.fingerprint()))
    switched = engine.store.switch_vectors(kb, config)
    assert engine.store.sentence_vectors(switched, ids) == {}
    fresh = built(tmp_path / "fresh.db", sentences=False, embedder="hashing:128")
    assert ask_all(engine, QUESTIONS[:10]) == ask_all(fresh, QUESTIONS[:10])


def test_backfill_gives_an_older_knowledge_base_its_sentence_vectors(tmp_path: Path,
                                                                     embedded: list[str]) -> None:
    engine = built(tmp_path / "old.db", sentences=False)
    before = ask_all(engine, QUESTIONS[:10])
    kb = engine.store.get_kb("s")
    total = engine.store.count_chunks(kb)
    done: list[int] = []
    assert sentence_vectors.backfill(engine.store, kb, get_embedder("hashing:256"), batch=50,
                                     progress=done.append) == total
    assert sum(done) == total and len(done) == -(-total // 50)
    assert engine.store.chunks_without_sentences(kb, -1, 10) == []
    embedded.clear()
    assert ask_all(engine, QUESTIONS[:10]) == before
    assert len(embedded) < 10 + 3  # the questions (and at most a joined table row or two)
    assert sentence_vectors.backfill(engine.store, kb, get_embedder("hashing:256")) == 0


def test_kb_backfill_command(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from citewise.cli import app

    built(tmp_path / "cli.db", sentences=False).store.close()
    result = CliRunner().invoke(app, ["--db", str(tmp_path / "cli.db"), "kb", "backfill", "s", "-q"])
    assert result.exit_code == 0, result.output
    assert "sentence vectors stored for 161 chunks" in result.output


def test_a_row_lacking_some_texts_is_served_and_its_chunk_made_when_one_is_asked(
        tmp_path: Path, embedded: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    engine = built(tmp_path / "partial.db")
    kb = engine.store.get_kb("s")
    embedders_base._cache.clear()
    result = engine.ask(kb, QUESTION)
    assert isinstance(result, Answer)
    store = engine.store
    cited = store.chunk_by_id(kb, result.citations[0].chunk_id)
    key = next(k for k, c in store.chunks(kb, [int(k) for k in store.dense_index(kb).keys]).items()
               if c.id == cited.id)
    # its row holding one of its texts only, as a row made before its chunk's texts changed
    every = sentence_vectors.texts(cited)
    units, lacking = every[:1], set(every[1:])
    assert lacking
    model = get_embedder(kb.config.embedder)
    row = SentenceVectors.build(model.name, units, model.embed(units))
    store.put_sentence_vectors(kb, [(key, cited.id, row)])
    made: list[str] = []  # the chunks whose vectors are made in their passage, as at ingest
    real = sentence_vectors.embed_chunks
    monkeypatch.setattr(sentence_vectors, "embed_chunks", lambda model, chunks, *a, **k: (
        made.extend(c.id for c in chunks) or real(model, chunks, *a, **k)))
    embedded.clear()
    embedders_base._cache.clear()
    assert outcome(engine.ask(kb, QUESTION)) == outcome(result)
    assert lacking <= set(embedded) and made.count(cited.id) == 1  # made once, when first missed
    assert all(c == cited.id for c in made)  # the other rows are whole: served as stored
