"""The local model without torch: an ONNX graph built from the shipped weights reproduces the
vectors recorded from sentence-transformers, batched or alone, and its cache heals itself."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from citewise.embedders import bert_onnx, local_onnx
from citewise.embedders.local import BATCH_SIZE, LocalEmbedder
from citewise.embedders.runtimes import OnnxRuntime
from citewise.errors import EmbedderError

pytestmark = pytest.mark.model

ROOT = Path(__file__).resolve().parent.parent
REFERENCES = np.load(Path(__file__).parent / "data" / "minilm_references.npz")
TEXTS = [str(t) for t in REFERENCES["texts"]]
MIN_COSINE = 0.9999


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A cache folder of this module's own, so its graph is built here, from the weights."""
    folder = tmp_path_factory.mktemp("citewise-cache")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("CITEWISE_CACHE", str(folder))
        yield folder


@pytest.fixture(scope="module")
def model(cache: Path) -> LocalEmbedder:
    return LocalEmbedder()


def cosines(got: np.ndarray, expected: np.ndarray) -> np.ndarray:
    return (got * expected).sum(1) / np.linalg.norm(got, axis=1) / np.linalg.norm(expected, axis=1)


NO_TORCH = "import sys\nsys.modules.update(torch=None, sentence_transformers=None, transformers=None)\n"


def without_torch(code: str, cache: Path) -> None:
    """Run ``code`` in a fresh process where importing torch, sentence-transformers or
    transformers fails, with this module's cache."""
    env = {**os.environ, "CITEWISE_CACHE": str(cache), "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", NO_TORCH + code], env=env, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]


def test_the_graph_built_without_torch_reproduces_the_references(
        model: LocalEmbedder, cache: Path, tmp_path: Path) -> None:
    expected = REFERENCES["vectors"]
    assert len(TEXTS) >= 30 and any(model.count_tokens(t) > model.max_tokens for t in TEXTS)
    model.embed(["warm"])  # the graph is built here, from the weights; the child loads it
    out = tmp_path / "got.npz"
    without_torch(
        "import numpy as np\n"
        "from citewise.embedders import get_embedder\n"
        f"texts = [str(t) for t in np.load({str(Path(__file__).parent / 'data' / 'minilm_references.npz')!r})"
        "['texts']]\n"
        "m = get_embedder()\n"
        "batched = m.embed(texts)\n"  # several length-sorted batches, on the batch graph
        "alone = np.vstack([m.embed([t]) for t in texts])\n"  # the one-thread question graph
        "m.embed_tokens(texts[-3:])\n"
        f"np.savez({str(out)!r}, batched=batched, alone=alone)\n", cache)
    got = np.load(out)
    for key in ("batched", "alone"):
        assert got[key].dtype == np.float32 and got[key].shape == expected.shape
        worst = cosines(got[key], expected)
        assert worst.min() >= MIN_COSINE, TEXTS[int(worst.argmin())]
    np.testing.assert_allclose(got["batched"], got["alone"], atol=1e-5)


@pytest.mark.parametrize("fused", [True, False], ids=["fused-kernels", "standard-onnx-ops"])
def test_both_ways_of_writing_the_graph_reproduce_the_references(model: LocalEmbedder, fused: bool) -> None:
    graph = bert_onnx.build_graph(*bert_onnx.load(model.path), model.model, fused=fused)
    session = OnnxRuntime(local_onnx.open_session(graph.SerializeToString(), 1), None)
    rows = [e.ids for e in model._tokenizer.encode_batch(TEXTS[:-4])]  # those that fit the model
    vectors, states = model._run(session, rows, tokens=True)
    assert cosines(vectors, REFERENCES["vectors"][:-4]).min() >= MIN_COSINE
    assert cosines(states[0], REFERENCES["tokens_0"]).min() >= MIN_COSINE


def test_token_states_are_the_last_hidden_state_with_character_spans(model: LocalEmbedder) -> None:
    texts = [str(t) for t in REFERENCES["token_texts"]]
    out = model.embed_tokens(texts)
    assert len(out) == len(texts)
    for i, (text, (states, spans)) in enumerate(zip(texts, out, strict=True)):
        expected = REFERENCES[f"tokens_{i}"]  # [CLS] ... [SEP], from sentence-transformers
        assert states.dtype == np.float32 and states.shape == expected.shape
        assert cosines(states, expected).min() >= MIN_COSINE
        assert spans.shape == (len(states), 2) and spans.dtype.kind == "i"
        assert spans[0].tolist() == [0, 0] and spans[-1].tolist() == [0, 0]
        inner = spans[1:-1]
        assert (inner[:, 0] < inner[:, 1]).all() and (np.diff(inner[:, 0]) > 0).all()
        assert all(text[a:b].strip() == text[a:b] and text[a:b] for a, b in inner)
        pooled = states.mean(0, keepdims=True)  # one piece: the mean is the text's vector
        assert cosines(pooled, model.embed([text]))[0] >= MIN_COSINE
    states, spans = model.embed_tokens(["Café au lait."])[0]
    assert ["Café au lait."[a:b].lower() for a, b in spans[1:-1]] == ["café", "au", "lai", "t", "."]


def test_a_long_text_gets_the_token_states_of_each_piece(model: LocalEmbedder) -> None:
    long = TEXTS[-1]
    assert model.count_tokens(long) > 2 * model.max_tokens
    pieces = model.pieces(long)
    [(states, spans)] = model.embed_tokens([long])
    special = np.flatnonzero((spans == 0).all(1))
    starts, ends = special[0::2], special[1::2]
    assert len(starts) == len(pieces) >= 3 and (starts[1:] == ends[:-1] + 1).all()
    assert len(states) == sum(model.count_tokens(p) + 2 for p in pieces)
    inner = spans[(spans != 0).any(1)]
    assert (np.diff(inner[:, 0]) > 0).all()  # every word piece once, in the text's order
    assert all(long[a:b].strip() for a, b in inner)
    # each piece is run as the model runs that piece alone
    np.testing.assert_allclose(states[: ends[0] + 1], model.embed_tokens([pieces[0]])[0][0], atol=1e-4)
    # among texts that fit, it is split and run as when it is alone, and they as they are alone
    mixed = model.embed_tokens([TEXTS[0], long, TEXTS[1]])
    np.testing.assert_array_equal(mixed[1][1], spans)
    np.testing.assert_allclose(mixed[1][0], states, atol=1e-4)
    for (alone_states, alone_spans), (s, o) in zip(model.embed_tokens([TEXTS[0], TEXTS[1]]),
                                                   (mixed[0], mixed[2]), strict=True):
        np.testing.assert_array_equal(o, alone_spans)
        np.testing.assert_allclose(s, alone_states, atol=1e-4)
    assert model.embed_tokens([]) == []
    [(empty, none)] = model.embed_tokens([""])
    assert empty.shape == (2, model.dim) and none.tolist() == [[0, 0], [0, 0]]


def test_batches_are_sorted_by_length_and_give_one_by_ones_vectors(
        model: LocalEmbedder, monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(7)
    words = "nicotine patch dose withdrawal week craving relapse placebo trial".split()
    texts = [" ".join(rng.choice(words, size=int(rng.integers(1, 60)))) for _ in range(3 * BATCH_SIZE)]
    widths: list[tuple[int, int]] = []
    real_run = OnnxRuntime.run

    def spy(self: OnnxRuntime, ids: np.ndarray, mask: np.ndarray, tokens: bool = False) -> list:
        widths.append(ids.shape)
        assert (mask.sum(1) == mask.shape[1]).any()  # padded to this batch's longest, no wider
        return real_run(self, ids, mask, tokens)

    monkeypatch.setattr(OnnxRuntime, "run", spy)
    batched = model.embed(texts)
    lengths = sorted((len(model._tokenizer.encode(t).ids) for t in texts), reverse=True)
    assert [w[0] for w in widths] == [BATCH_SIZE] * 3
    assert [w[1] for w in widths] == lengths[::BATCH_SIZE]  # longest first, little padding
    monkeypatch.setattr(OnnxRuntime, "run", real_run)
    alone = np.vstack([model.embed([t]) for t in texts])
    np.testing.assert_allclose(batched, alone, atol=1e-5)


def test_the_cache_is_reused_without_rehashing_and_rebuilt_when_changed(
        model: LocalEmbedder, cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    model.embed(["warm"])  # the module's graph exists
    [graph] = (cache / "onnx").glob("*.onnx")
    data = graph.with_name(graph.name + ".data")
    assert graph.stat().st_size < 100_000 < 80_000_000 < data.stat().st_size
    hashed: list[Path] = []
    built: list[Path] = []
    real_hash, real_save = local_onnx.file_sha256, bert_onnx.save
    monkeypatch.setattr(local_onnx, "file_sha256", lambda p: (hashed.append(p), real_hash(p))[1])
    monkeypatch.setattr(bert_onnx, "save", lambda m, o: (built.append(o), real_save(m, o))[1])
    question = TEXTS[:1]

    def fresh_process_agrees() -> bool:
        return bool(cosines(LocalEmbedder().embed(question), REFERENCES["vectors"][:1])[0] >= MIN_COSINE)

    assert fresh_process_agrees()
    assert hashed == [graph] and built == []  # neither the 90 MB weights hashed nor a build

    with data.open("r+b") as f:  # the weights rewritten in place: their mtime changes
        f.seek(data.stat().st_size // 2)
        f.write(b"\x00\x01\x02\x03" * 64)
    assert fresh_process_agrees() and len(built) == 1

    stat = graph.stat()
    graph.write_bytes(graph.read_bytes()[:-100] + bytes(100))  # the small graph: hashed each load
    os.utime(graph, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert fresh_process_agrees() and len(built) == 2

    os.truncate(data, data.stat().st_size // 3)
    assert fresh_process_agrees() and len(built) == 3
    assert all(p.name == graph.name for p in hashed)  # never the weights: they were trusted
    assert sorted(p.name for p in graph.parent.iterdir()) == sorted(
        [graph.name, data.name, graph.stem + ".json"])  # no temporary files left


def test_an_unwritable_cache_costs_a_build_not_a_failure(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    not_a_folder = tmp_path / "cache"
    not_a_folder.write_text("a file where the cache folder should be")
    monkeypatch.setenv("CITEWISE_CACHE", str(not_a_folder))
    with caplog.at_level(logging.WARNING):
        got = LocalEmbedder().embed(TEXTS[:2])
    assert cosines(got, REFERENCES["vectors"][:2]).min() >= MIN_COSINE
    assert "the graph is built in every process" in caplog.text
    assert "hashed again next time" in caplog.text


def test_a_graph_that_disagrees_with_the_probes_is_refused_and_not_kept(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CITEWISE_CACHE", str(tmp_path))
    monkeypatch.setattr(local_onnx, "MIN_COSINE", 1.01)  # nothing can agree this well
    with pytest.raises(EmbedderError, match="disagrees with the recorded probe vectors"):
        LocalEmbedder().embed(["x"])
    assert not list((tmp_path / "onnx").glob("*.onnx"))


MODEL_MODULES = ("onnxruntime", "onnx", "tokenizers", "torch", "citewise.embedders.local",
                 "citewise.embedders.local_onnx", "citewise.embedders.bert_onnx")


@pytest.mark.parametrize("args", [["--help"], ["kb", "list"]])
def test_help_and_kb_list_import_no_model_code(args: list[str], tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-X", "importtime", "-m", "citewise",
                           "--db", str(tmp_path / "kb.db"), *args],
                          env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    imported = {line.rsplit("|", 1)[-1].strip() for line in done.stderr.splitlines() if "|" in line}
    assert "citewise.cli" in imported
    assert not imported & set(MODEL_MODULES)
