"""The default local model: real weights from the installed package, checked and offline."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from citewise.embedders import get_embedder
from citewise.embedders.local import LocalEmbedder
from citewise.errors import ConfigError, EmbedderError, UnknownNameError


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


def test_corrupt_weights_are_refused(tmp_path: Path, model: LocalEmbedder) -> None:
    copy = tmp_path / "model"
    shutil.copytree(model.path, copy)
    with (copy / "model.safetensors").open("r+b") as f:
        f.seek(1000)
        f.write(b"\x00\x01\x02\x03")
    broken = LocalEmbedder()
    broken.path = copy
    with pytest.raises(EmbedderError, match="sha256"):
        broken.embed(["x"])


def test_unknown_names_list_the_valid_ones() -> None:
    valid = "Valid embedder names: gemini, hashing, local, openai, openai-compatible"
    with pytest.raises(UnknownNameError, match=valid):
        get_embedder("nope:model")
    with pytest.raises(ConfigError, match="all-MiniLM-L6-v2"):
        get_embedder("local:bert-huge")
