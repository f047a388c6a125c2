"""Questions on ONNX Runtime: the same vectors as torch, a cache that heals itself, no network."""

from __future__ import annotations

import json
import logging
import os
import shutil
from pathlib import Path

import numpy as np
import pytest

from citewise.embedders import get_embedder, local_onnx
from citewise.embedders.local import QUERY_PIECES, LocalEmbedder
from citewise.errors import ConfigError

QUESTIONS = [
    "How is varenicline dosed?",
    "0-dimensional biomaterials show inductive properties.",
    "Does bupropion lower the seizure threshold in patients with a history of eating disorders?",
    "",
]


@pytest.fixture(scope="module")
def model() -> LocalEmbedder:
    m = get_embedder("local:all-MiniLM-L6-v2")
    assert isinstance(m, LocalEmbedder)
    return m


def sharing_torch(model: LocalEmbedder, backend: str = "onnx") -> LocalEmbedder:
    """A new embedder that reuses the loaded torch model (loading it again costs seconds)."""
    fresh = LocalEmbedder(backend=backend)
    fresh.__dict__["_model"] = model._model
    return fresh


@pytest.mark.slow
def test_questions_get_torchs_vectors_without_torch(model: LocalEmbedder) -> None:
    torch_only = sharing_torch(model, backend="torch")
    expected = np.vstack([torch_only.embed([q]) for q in QUESTIONS])
    assert len(QUESTIONS) <= QUERY_PIECES
    assert model._onnx is not None
    onnx_only = LocalEmbedder()
    onnx_only.__dict__["_onnx"] = model._onnx
    onnx_only.__dict__["_model"] = None  # any use of torch would fail
    alone = np.vstack([onnx_only.embed([q]) for q in QUESTIONS])
    padded = onnx_only.embed(QUESTIONS)  # one batch of different lengths
    for got in (alone, padded):
        assert got.dtype == np.float32 and got.shape == (len(QUESTIONS), 384)
        np.testing.assert_allclose(got, expected, atol=2e-5)
        assert (got * expected).sum(1).min() >= 0.9999


@pytest.mark.slow
def test_the_cache_is_built_reused_and_rebuilt_when_corrupt(
        model: LocalEmbedder, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CITEWISE_CACHE", str(tmp_path))
    exports: list[Path] = []
    real_export = local_onnx.export
    monkeypatch.setattr(local_onnx, "export", lambda st, path: (exports.append(path), real_export(st, path)))
    expected = sharing_torch(model, "torch").embed(QUESTIONS[:2])

    np.testing.assert_allclose(sharing_torch(model).embed(QUESTIONS[:2]), expected, atol=2e-5)
    folder = tmp_path / "onnx"
    [onnx_file] = folder.glob("*.onnx")
    meta = json.loads(next(folder.glob("*.json")).read_text())
    assert len(exports) == 1 and meta["onnx_sha256"] == local_onnx.file_sha256(onnx_file)
    assert meta["weights_sha256"] == model.info["sha256"] and os.environ["HF_HUB_OFFLINE"] == "1"
    assert sorted(p.name for p in folder.iterdir()) == sorted([onnx_file.name, onnx_file.stem + ".json"])

    sharing_torch(model).embed(QUESTIONS[:1])
    assert len(exports) == 1  # intact: reused

    with onnx_file.open("r+b") as f:
        f.seek(onnx_file.stat().st_size // 2)
        f.write(b"\x00\x01\x02\x03" * 64)
    np.testing.assert_allclose(sharing_torch(model).embed(QUESTIONS[:2]), expected, atol=2e-5)
    assert len(exports) == 2
    assert json.loads(next(folder.glob("*.json")).read_text())["onnx_sha256"] == local_onnx.file_sha256(
        onnx_file)


@pytest.mark.slow
def test_an_export_that_disagrees_with_torch_leaves_questions_on_torch(
        model: LocalEmbedder, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    good = model._onnx.path  # a sound export, made before the bar is raised
    monkeypatch.setenv("CITEWISE_CACHE", str(tmp_path))
    monkeypatch.setattr(local_onnx, "MIN_COSINE", 1.01)  # nothing can agree this well
    monkeypatch.setattr(local_onnx, "export", lambda st, path: shutil.copyfile(good, path))
    fresh = sharing_torch(model)
    with caplog.at_level(logging.WARNING):
        got = fresh.embed(QUESTIONS[:1])
    assert fresh._onnx is None
    assert "embedded with torch" in caplog.text and "disagrees with torch" in caplog.text
    np.testing.assert_allclose(got, sharing_torch(model, "torch").embed(QUESTIONS[:1]), atol=1e-6)
    assert not list((tmp_path / "onnx").glob("*.onnx"))  # nothing wrong is kept


def test_the_backend_is_chosen_by_argument_or_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    assert LocalEmbedder().backend == "onnx"
    monkeypatch.setenv("CITEWISE_LOCAL_BACKEND", "torch")
    assert LocalEmbedder().backend == "torch"
    assert LocalEmbedder(backend="onnx").backend == "onnx"
    with pytest.raises(ConfigError, match="onnx, torch"):
        LocalEmbedder(backend="tensorflow")
