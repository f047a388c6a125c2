"""The local model's fast path for questions: the same network run by ONNX Runtime.

A question is a few word pieces; torch spends most of its ~25 ms on one such input in
per-operator overhead, ONNX Runtime does the same arithmetic in about half the time
(``benchmarks/scifact.py`` times both in one run). The ONNX file is made from the checked
weights once, by torch's exporter, and kept in a user cache:

    $CITEWISE_CACHE (else $XDG_CACHE_HOME/citewise, else ~/.cache/citewise)
        onnx/<model>-<weights sha256[:16]>-f<FORMAT>.onnx   the network, mean pooling, L2 norm
        onnx/<model>-<weights sha256[:16]>-f<FORMAT>.json   its sha256 and torch's probe vectors

Both are written to temporary files and renamed into place, so a half-written file is never
read. On every load the file's sha256 is checked and the probe sentences are run through it:
a vector that differs from torch's (cosine below ``MIN_COSINE``) or a missing, corrupt or
stale file means it is exported again and checked against torch. Nothing here reaches the
network: the export reads the same local weights the torch path does.
"""

from __future__ import annotations

import copy
import hashlib
import json
import logging
import os
import tempfile
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import EmbedderError

log = logging.getLogger(__name__)
FORMAT = 2  # bump when the exported graph changes, so old cache files are not reused
MIN_COSINE = 0.9999
OPSET = 17
PROBES = (
    "How is varenicline dosed?",
    "0-dimensional biomaterials show inductive properties.",
    "A text of a few more words, so that a batch of probes is padded on the right side.",
    "",
)


def cache_dir() -> Path:
    """Where exported models are kept (``$CITEWISE_CACHE``, else the user's cache folder)."""
    if os.environ.get("CITEWISE_CACHE"):
        return Path(os.environ["CITEWISE_CACHE"])
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "citewise"


def file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


@dataclass(frozen=True)
class OnnxModel:
    """An ONNX Runtime session of the model and the tokenizer it reads ids from."""

    session: Any = field(repr=False)
    tokenizer: Any = field(repr=False)
    max_len: int
    path: Path

    def embed(self, texts: list[str]) -> np.ndarray:
        """Unit vectors, mean-pooled over each text's word pieces, as sentence-transformers
        computes them (texts longer than ``max_len`` pieces are cut as it cuts them)."""
        rows = [e.ids for e in self.tokenizer.encode_batch(texts)]
        rows = [r if len(r) <= self.max_len else r[: self.max_len - 1] + r[-1:] for r in rows]
        ids = np.zeros((len(rows), max(len(r) for r in rows)), dtype=np.int64)
        mask = np.zeros_like(ids)
        for i, r in enumerate(rows):
            ids[i, : len(r)] = r
            mask[i, : len(r)] = 1
        return self.session.run(None, {"input_ids": ids, "attention_mask": mask})[0]


def open_session(path: Path, threads: int | None) -> Any:
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.inter_op_num_threads = 1
    if threads is not None:
        options.intra_op_num_threads = threads
    options.log_severity_level = 3  # errors only
    return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])


def load_or_build(model: str, weights_sha: str, tokenizer: Any, max_len: int, threads: int | None,
                  sentence_transformer: Callable[[], Any]) -> OnnxModel:
    """The cached ONNX model for these weights, checked; exported again (and checked against
    ``sentence_transformer()``, the torch model) when missing, corrupt or disagreeing.
    Raises EmbedderError when a fresh export still disagrees with torch."""
    folder = cache_dir() / "onnx"
    stem = f"{model}-{weights_sha[:16]}-f{FORMAT}"
    path, meta_path = folder / f"{stem}.onnx", folder / f"{stem}.json"
    try:
        meta = json.loads(meta_path.read_text())
        if meta["onnx_sha256"] == file_sha256(path) and meta["weights_sha256"] == weights_sha:
            found = OnnxModel(open_session(path, threads), tokenizer, max_len, path)
            if _agreement(found, np.asarray(meta["probes"], dtype=np.float32)) >= MIN_COSINE:
                return found
    except (OSError, ValueError, KeyError, TypeError, RuntimeError):
        pass  # missing, unreadable or corrupt: export it again below
    log.info("exporting %s to ONNX once, into %s", model, folder)
    st = sentence_transformer()
    expected = st.encode(list(PROBES), convert_to_numpy=True, normalize_embeddings=True)
    folder.mkdir(parents=True, exist_ok=True)
    tmp, meta_tmp = _temp_path(folder, ".onnx"), _temp_path(folder, ".json")
    try:
        export(st, tmp)
        fresh = OnnxModel(open_session(tmp, threads), tokenizer, max_len, path)
        agreement = _agreement(fresh, expected)
        if agreement < MIN_COSINE:
            raise EmbedderError(
                f"the ONNX export of {model} disagrees with torch (cosine {agreement:.6f} on probe "
                f"sentences, below {MIN_COSINE})"
            )
        meta_tmp.write_text(json.dumps({
            "model": model, "format": FORMAT, "weights_sha256": weights_sha,
            "onnx_sha256": file_sha256(tmp), "probes": expected.tolist(),
        }))
        for done in (tmp, meta_tmp):
            done.chmod(0o644)  # mkstemp's files are private; the cache may be shared
        os.replace(tmp, path)
        os.replace(meta_tmp, meta_path)
    finally:
        tmp.unlink(missing_ok=True)
        meta_tmp.unlink(missing_ok=True)
    return fresh


def _agreement(model: OnnxModel, expected: np.ndarray) -> float:
    """The lowest cosine between the model's probe vectors and ``expected`` (one batch, padded,
    and each probe alone)."""
    batch = model.embed(list(PROBES))
    alone = np.vstack([model.embed([p]) for p in PROBES])
    if batch.shape != expected.shape or alone.shape != expected.shape:
        return -1.0
    return float(min((batch * expected).sum(1).min(), (alone * expected).sum(1).min()))


def _temp_path(folder: Path, suffix: str) -> Path:
    fd, name = tempfile.mkstemp(dir=folder, prefix=".building-", suffix=suffix)
    os.close(fd)
    return Path(name)


def export(st: Any, path: Path) -> None:
    """Write the sentence-transformers model (transformer, mean pooling, normalise) to ``path``
    as one ONNX graph taking ``input_ids`` and ``attention_mask``."""
    import torch

    kinds = [type(m).__name__ for m in st]
    pooling = st[1].get_config_dict().get("pooling_mode") if len(kinds) > 1 else None
    if kinds != ["Transformer", "Pooling", "Normalize"] or pooling != "mean":
        raise EmbedderError(f"cannot export a {kinds} model with {pooling} pooling to ONNX")

    class Pooled(torch.nn.Module):
        def __init__(self, network: torch.nn.Module) -> None:
            super().__init__()
            self.network = network

        def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
            hidden = self.network(input_ids=input_ids, attention_mask=attention_mask,
                                  token_type_ids=torch.zeros_like(input_ids)).last_hidden_state
            mask = attention_mask.unsqueeze(-1).to(hidden.dtype)
            mean = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
            return torch.nn.functional.normalize(mean, p=2.0, dim=1)

    network = copy.deepcopy(st[0].auto_model).eval()
    if hasattr(network, "set_attn_implementation"):
        # plain attention exports to a graph ONNX Runtime runs ~6% faster than SDPA's
        network.set_attn_implementation("eager")
    example = torch.tensor([[101, 2023, 2003, 1037, 3231, 102], [101, 3231, 102, 0, 0, 0]])
    axes = {"batch": 0, "tokens": 1}
    dynamic = {name: {i: a for a, i in axes.items()} for name in ("input_ids", "attention_mask")}
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")  # the exporter's tracer and deprecation notes
        torch.onnx.export(
            Pooled(network), (example, (example != 0).long()), str(path),
            input_names=["input_ids", "attention_mask"], output_names=["embedding"],
            dynamic_axes={**dynamic, "embedding": {0: "batch"}}, opset_version=OPSET, dynamo=False,
        )
