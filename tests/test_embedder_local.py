"""The default local model: real weights from the installed package, checked once and offline."""

from __future__ import annotations

import os
import shutil
import threading
from pathlib import Path

import numpy as np
import pytest

from citewise.embedders import get_embedder, local_onnx, questions_in_flight
from citewise.embedders.local import QUERY_PIECES, LocalEmbedder, batch_threads
from citewise.errors import ConfigError, EmbedderError, UnknownNameError

pytestmark = pytest.mark.model


@pytest.fixture(scope="module")
def model() -> LocalEmbedder:
    m = get_embedder("local:all-MiniLM-L6-v2")
    assert isinstance(m, LocalEmbedder)
    return m


def test_vectors_are_unit_float32_and_meaningful(model: LocalEmbedder) -> None:
    v = model.embed(["nicotine patch dose", "nicotine replacement patch dosing", "tax law"])
    assert v.shape == (3, 384) and v.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(v, axis=1), 1.0, rtol=1e-5)
    assert v[0] @ v[1] > v[0] @ v[2] + 0.3


def test_long_text_is_split_not_truncated(model: LocalEmbedder) -> None:
    head = "Nicotine withdrawal peaks in the first days. " * 30
    tail = "The launch of the Apollo rocket was delayed by weather. " * 30
    assert model.count_tokens(head + tail) > model.max_tokens
    pieces = model.pieces(head + tail)
    assert len(pieces) > 1 and all(model.count_tokens(p) <= model.max_tokens for p in pieces)
    both, only_head, only_tail = model.embed([head + tail, head, tail])
    # a truncating model would see only the head; the tail must count too
    assert both @ only_tail > 0.4 and both @ only_head < 0.95


def test_texts_are_run_as_their_pieces_with_one_encoding_when_they_fit(model: LocalEmbedder) -> None:
    from citewise.embedders.base import split_all

    at_limit, over = "x " * model.max_tokens, "x " * (model.max_tokens + 1)
    assert model.count_tokens(at_limit) == model.max_tokens  # fits exactly; ``over`` does not
    texts = ["short question?", at_limit, over, "nicotine " * 400, ""]
    for batch in [*([t] for t in texts), texts, texts[:2]]:
        pieces, owner = split_all(batch, model.pieces)  # what embed ran before
        want = [e.ids for e in model._tokenizer.encode_batch(pieces)]
        assert model._rows(batch) == (want, owner), batch


def test_weights_are_hashed_once_then_trusted_by_size_and_mtime_and_corrupt_ones_refused(
        tmp_path: Path, model: LocalEmbedder, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CITEWISE_CACHE", str(tmp_path / "cache"))
    copy = tmp_path / "model"
    shutil.copytree(model.path, copy)
    weights = copy / "model.safetensors"
    hashed: list[Path] = []
    real = local_onnx.file_sha256
    monkeypatch.setattr(local_onnx, "file_sha256", lambda p: (hashed.append(p), real(p))[1])

    def checked() -> str:
        fresh = LocalEmbedder()  # as a new process would
        fresh.path = copy
        return fresh._weights_sha256

    assert checked() == checked() == model.info["sha256"]
    assert hashed == [weights]  # the second process trusted the recorded hash
    with weights.open("r+b") as f:
        f.seek(1000)
        f.write(b"\x00\x01\x02\x03")
    with pytest.raises(EmbedderError, match="sha256"):
        checked()
    stat = weights.stat()
    os.utime(weights, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))
    with pytest.raises(EmbedderError, match="sha256"):
        checked()
    assert hashed == [weights] * 3  # every change of mtime is hashed again


def test_unknown_names_list_the_valid_ones() -> None:
    valid = "Valid embedder names: gemini, hashing, local, openai, openai-compatible"
    with pytest.raises(UnknownNameError, match=valid):
        get_embedder("nope:model")
    with pytest.raises(ConfigError, match="all-MiniLM-L6-v2"):
        get_embedder("local:bert-huge")


def test_a_batch_runs_on_a_thread_per_core_and_a_question_alone_too(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    assert batch_threads() == len(os.sched_getaffinity(0))
    monkeypatch.setenv("OMP_NUM_THREADS", "1")  # as Ray sets it for a one-CPU worker
    assert batch_threads() == 1
    fresh = LocalEmbedder()
    fresh.embed(["one question"])
    assert "_batch_graph" not in fresh.__dict__  # one core: a question runs on the one-thread graph
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    fresh.embed([f"text {i}" for i in range(QUERY_PIECES + 1)])
    threads = {name: fresh.__dict__[name].session.get_session_options().intra_op_num_threads
               for name in ("_query_graph", "_batch_graph")}
    assert threads == {"_query_graph": 1, "_batch_graph": 3}


def test_a_question_takes_every_core_only_when_it_is_the_only_one(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OMP_NUM_THREADS", "2")
    fresh = LocalEmbedder()
    used: list[int] = []
    for graph in ("_query_graph", "_batch_graph"):
        real = getattr(fresh, graph)

        class Seen:
            def __init__(self, real: object, threads: int) -> None:
                self.real, self.threads = real, threads

            def run(self, *args: object, **kw: object) -> object:
                used.append(self.threads)
                return self.real.run(*args, **kw)  # type: ignore[attr-defined]

        fresh.__dict__[graph] = Seen(real, 1 if graph == "_query_graph" else 2)
    question = "How long do withdrawal symptoms last?"
    with questions_in_flight.answering():
        alone = fresh.embed([question])  # the process's only question: every core
        other_started, other_may_end = threading.Event(), threading.Event()

        def other_question() -> None:
            with questions_in_flight.answering():
                other_started.set()
                other_may_end.wait(10)

        other = threading.Thread(target=other_question)
        other.start()
        other_started.wait(10)
        busy = fresh.embed([question])  # another question in flight: one thread
        other_may_end.set()
        other.join()
        fresh._running += 1  # a batch of this embedder running (an ingest beside the question)
        beside_ingest = fresh.embed([question])
        fresh._running -= 1
    outside = fresh.embed([question])  # not a question (e.g. a test's own embed): one thread
    assert used == [2, 1, 1, 1]
    for other_vector in (busy, beside_ingest, outside):  # the same vector either way
        np.testing.assert_allclose(alone, other_vector, atol=1e-6)
