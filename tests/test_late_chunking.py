"""Sentence vectors from the chunk's own forward pass (late chunking) on the local model."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from citewise.answer import sentence_vectors
from citewise.embedders import get_embedder
from citewise.embedders.base import normalise
from citewise.embedders.local import LocalEmbedder
from citewise.engine import Engine
from citewise.ingest import late_chunking
from citewise.kb import GateSetting
from citewise.records import Answer, Chunk
from citewise.stores.sentence_rows import SentenceVectors, text_key
from citewise.stores.sqlite import open_sqlite
from tests.helpers import SAMPLE

LOCAL = "local:all-MiniLM-L6-v2"
FILES = [SAMPLE / "nicotine-withdrawal.md", SAMPLE / "varenicline.md"]
QUESTIONS = ["How long do nicotine withdrawal symptoms last?",
             "What is the usual varenicline dose schedule?",
             "Does varenicline cause nausea?"]


@pytest.fixture(scope="module")
def model() -> LocalEmbedder:
    m = get_embedder(LOCAL)
    assert isinstance(m, LocalEmbedder)
    return m


@pytest.fixture
def passes(monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """The texts of every call that runs the local model from now on, but for the questions
    themselves (one text each, which every ask embeds)."""
    seen: list[list[str]] = []

    def spy(name: str) -> None:
        real = getattr(LocalEmbedder, name)

        def call(self: LocalEmbedder, texts: list[str], *args: object, **kw: object) -> object:
            if list(texts) not in ([q] for q in QUESTIONS):
                seen.append(list(texts))
            return real(self, texts, *args, **kw)

        monkeypatch.setattr(LocalEmbedder, name, call)

    spy("embed")
    spy("embed_tokens")
    return seen


def built(path: Path) -> Engine:
    engine = Engine(open_sqlite(path))
    kb = engine.open_kb("s", embedder=LOCAL)
    gate = GateSetting("top1", 0.0, kb.config.embedder, kb.config.fingerprint(), "calibrated")
    engine.ingest(engine.store.update_kb("s", replace(kb.config, gate=gate)), FILES)
    return engine


def stored_chunks(engine: Engine) -> list[Chunk]:
    kb = engine.store.get_kb("s")
    return list(engine.store.chunks(kb, [int(k) for k in engine.store.dense_index(kb).keys]).values())


def outcomes(engine: Engine) -> list[tuple]:
    kb = engine.store.get_kb("s")
    out = []
    for q in QUESTIONS:
        r = engine.ask(kb, q)
        out.append(("answered", r.text, tuple(c.chunk_id for c in r.citations)) if isinstance(r, Answer)
                   else ("refused", r.path, r.reason))
    return out


def test_span_mean_is_the_mean_of_the_tokens_inside_the_span() -> None:
    text = "Ab cd. Ef gh."
    # [CLS] Ab cd . Ef gh . [SEP], with known states
    offsets = np.array([(0, 0), (0, 2), (3, 5), (5, 6), (7, 9), (10, 12), (12, 13), (0, 0)])
    states = np.arange(8 * 3, dtype=np.float32).reshape(8, 3) ** 1.5
    first, second = late_chunking.spans(text, ["Ab cd.", "Ef  gh."])
    assert (first, second) == ((0, 6), (7, 13))  # the second found with white space folded
    got = late_chunking.span_means(states, offsets, [first, second, None], "t")
    np.testing.assert_allclose(got[0], normalise(states[1:4].mean(0, keepdims=True), "t")[0], rtol=1e-6)
    np.testing.assert_allclose(got[1], normalise(states[4:7].mean(0, keepdims=True), "t")[0], rtol=1e-6)
    assert got[2] is None
    # the chunk's vector: every token, [CLS] and [SEP] included
    np.testing.assert_allclose(late_chunking.pooled(states, offsets, "t"),
                               normalise(states.mean(0, keepdims=True), "t")[0], rtol=1e-6)


@pytest.mark.model
def test_a_sentence_is_the_mean_of_its_tokens_in_the_chunks_pass(model: LocalEmbedder) -> None:
    chunk = Chunk("d", 0, ("Withdrawal",), "Cravings peak early. They fade within four weeks.", "Quitting")
    (states, offsets), = model.embed_tokens([chunk.embed_text])
    start = chunk.embed_text.index("They")
    inside = [i for i, (a, b) in enumerate(offsets) if b > a and a >= start]
    assert [chunk.embed_text[a:b] for a, b in offsets[inside]] == \
        ["They", "fade", "within", "four", "weeks", "."]
    vectors, said = sentence_vectors.embed_chunks(model, [chunk], True, [["They fade within four weeks."]])
    assert said is not None
    want = states[inside].mean(0) / np.linalg.norm(states[inside].mean(0))
    np.testing.assert_allclose(said[0].vectors[0], want, atol=1e-5)
    # the chunk's vector is what embed gives for its text, as before
    np.testing.assert_allclose(vectors[0], model.embed([chunk.embed_text])[0], atol=1e-5)


@pytest.mark.model
def test_a_long_texts_pieces_pool_as_embed_does(model: LocalEmbedder) -> None:
    text = ("Nicotine withdrawal peaks in the first days.\n\n- Cravings fade within weeks. " * 25)
    assert len(model.pieces(text)) > 1
    (states, offsets), = model.embed_tokens([text])
    np.testing.assert_allclose(late_chunking.pooled(states, offsets, "t"), model.embed([text])[0], atol=1e-5)
    # the pieces' tokens, in order, spell the text (pieces drop white space and list markers)
    assert "".join(text[a:b] for a, b in offsets) == "".join(text.replace("- ", "").split())


@pytest.mark.model
def test_local_ingest_runs_each_chunk_once(tmp_path: Path, model: LocalEmbedder,
                                           passes: list[list[str]]) -> None:
    model.embed(["a question, so that the ONNX Runtime model is ready"])
    passes.clear()
    engine = built(tmp_path / "kb.db")
    chunks = stored_chunks(engine)
    assert len(passes) == 1  # one batch: the chunks' texts, once each, nothing else
    assert sorted(passes[0]) == sorted(c.embed_text for c in chunks)
    kb = engine.store.get_kb("s")
    index = engine.store.dense_index(kb)
    by_id = {c.id: c for c in chunks}
    stored = engine.store.chunks(kb, [int(k) for k in index.keys])
    texts = [stored[int(k)].embed_text for k in index.keys]
    np.testing.assert_allclose(index.matrix, model.embed(texts), atol=1e-5)  # as before
    rows = engine.store.sentence_vectors(kb, list(by_id))
    for chunk_id, chunk in by_id.items():
        assert rows[chunk_id].keys == tuple(text_key(LOCAL, t) for t in sentence_vectors.texts(chunk))
    passes.clear()
    result = engine.ask(kb, QUESTIONS[0])
    assert isinstance(result, Answer) and result.citations
    assert passes == []  # only the question ran: every sentence came from the store


@pytest.mark.model
def test_an_old_local_knowledge_base_answers_as_a_new_one(tmp_path: Path, model: LocalEmbedder,
                                                          passes: list[list[str]]) -> None:
    model.embed(["a question, so that the ONNX Runtime model is ready"])
    fresh = outcomes(built(tmp_path / "new.db"))
    engine = built(tmp_path / "old.db")
    store = engine.store
    kb = store.get_kb("s")
    # as m006 left it: each text embedded on its own, m009 not yet applied
    chunks = stored_chunks(engine)
    old = [(store.db.conn.execute("SELECT key FROM chunks WHERE chunk_id = ?", (c.id,)).fetchone()[0], c.id,
            SentenceVectors.build(LOCAL, sentence_vectors.texts(c), model.embed(sentence_vectors.texts(c))))
           for c in chunks]
    store.put_sentence_vectors(kb, old)
    store.db.conn.execute("DELETE FROM migrations WHERE name = 'm009_contextual_sentence_vectors'")
    store.close()
    reopened = Engine(open_sqlite(tmp_path / "old.db"))
    kb = reopened.store.get_kb("s")
    assert reopened.store.sentence_vectors(kb, [c.id for c in chunks]) == {}  # m009 dropped them
    passes.clear()
    assert outcomes(reopened) == fresh  # the context's chunks run now, as ingest runs them
    assert passes and all(len(b) <= kb.config.retrieval.context_k for b in passes)
    assert sentence_vectors.backfill(reopened.store, kb, model) == len(chunks)
    passes.clear()
    assert outcomes(reopened) == fresh
    assert passes == []

