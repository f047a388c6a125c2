"""Rows per model call at ingest: how many chunks the local model reads at once, per path.

    python -m benchmarks.embed_batches [--docs 800] [--sizes 32,16,8,4] [--paths PATH,...]

Ingest embeds each group of ``EMBED_BATCH_CHUNKS`` chunks in one ``embed_tokens`` call, whose
rows (a chunk's word pieces, or its pieces when it is longer than the model reads) are run
longest first, ``BATCH_SIZE`` at a time, each batch padded to its longest row. Fewer rows a
batch pad less; more give the kernels bigger products. This chunks the first ``--docs``
SciFact abstracts as ingest does (the shipped chunker, title lines included), cuts them into the
groups ingest makes, and times running every group's rows at each batch size on each path the
host offers (``--paths`` picks some), after one warm-up group: the model's time alone, not
chunking, pooling or writing. "padding" is the share of computed positions that are padding.

2026-12-07 18:34-18:53, first 800 SciFact abstracts (14 calls, 1,782 rows, 370,658 word pieces),
idle 2-core AMD EPYC, 2246 MHz (AVX2, no AVX-512: OpenVINO computes FP32 and INT8), load
average 1.0 before the run (2.0 during it: its own two threads), process CPU time 1,067 s:

    path               batch  padding  model s  word pieces/s
    onnxruntime-fp32      32     7.6%     70.7          5,245
    onnxruntime-fp32      16     4.0%     62.5          5,935
    onnxruntime-fp32       8     2.0%     59.9          6,190
    onnxruntime-fp32       4     0.9%     61.2          6,061
    openvino-f32          32     7.6%     64.3          5,762
    openvino-f32          16     4.0%     61.2          6,054
    openvino-f32           8     2.0%     60.7          6,106
    openvino-f32           4     0.9%     60.9          6,087

Eight rows pad a quarter as much as 32 and lose nothing to smaller products; four pad less
again but their kernels start to cost more. ``BATCH_SIZE`` is 8 (it was 32: -15% model time on
ONNX Runtime here, -6% on OpenVINO).
"""

from __future__ import annotations

import argparse
import itertools
import time

from benchmarks.benchcache import chunker_for, conditions, host, shared_data
from benchmarks.ingest import cpu_features
from citewise.embedders import DEFAULT_EMBEDDER, get_embedder, local, runtimes
from citewise.embedders.base import split_all
from citewise.engine import EMBED_BATCH_CHUNKS
from citewise.ingest.documents import Skipped, load_beir


def groups(docs: int) -> list[list[list[int]]]:
    """The word-piece rows of each ``embed_tokens`` call ingest makes for the first ``docs``
    SciFact abstracts."""
    model = get_embedder(DEFAULT_EMBEDDER)
    chunker = chunker_for(DEFAULT_EMBEDDER, "sections")
    texts: list[list[str]] = [[]]
    for doc in itertools.islice(load_beir(shared_data("scifact") / "corpus.jsonl"), docs):
        if isinstance(doc, Skipped):
            continue
        texts[-1] += [c.embed_text for c in chunker.chunk(doc)]
        if len(texts[-1]) >= EMBED_BATCH_CHUNKS:
            texts.append([])
    tokenizer = model._tokenizer
    return [[e.ids for e in tokenizer.encode_batch(split_all(group, model.pieces)[0])]
            for group in texts if group]


def padding(calls: list[list[list[int]]], size: int, max_len: int) -> float:
    """The share of positions computed that are padding, batches made as ``_run`` makes them."""
    real = padded = 0
    for rows in calls:
        lengths = sorted((min(len(r), max_len) for r in rows), reverse=True)
        real += sum(lengths)
        padded += sum(lengths[i] * len(lengths[i: i + size]) for i in range(0, len(lengths), size))
    return 1 - real / padded


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--docs", type=int, default=800, help="the first N SciFact abstracts")
    ap.add_argument("--sizes", default="32,16,8,4", help="rows per batch to time")
    ap.add_argument("--paths", default="", help="execution paths [default: every one offered]")
    args = ap.parse_args()
    calls = groups(args.docs)
    rows = [r for call in calls for r in call]
    model = get_embedder(DEFAULT_EMBEDDER)
    assert isinstance(model, local.LocalEmbedder)
    pieces = sum(min(len(r), model.max_len) for r in rows)
    print(f"{args.docs} abstracts: {len(calls)} calls, {len(rows):,} rows, {pieces:,} word pieces")
    print(f"{'path':18} {'batch':>5}  padding  model s  word pieces/s")
    shipped = local.BATCH_SIZE
    try:
        for path in [p for p in args.paths.split(",") if p] or runtimes.offered():
            runner = runtimes.open_runner(path, model._source, local.batch_threads())
            for size in map(int, args.sizes.split(",")):
                local.BATCH_SIZE = size
                model._run(runner, calls[0], tokens=True)  # warm: kernels planned for this size
                started = time.perf_counter()
                for call in calls:
                    model._run(runner, call, tokens=True)
                took = time.perf_counter() - started
                share = padding(calls, size, model.max_len)
                print(f"{path:18} {size:5} {share:8.1%} {took:8.1f} {pieces / took:14,.0f}", flush=True)
    finally:
        local.BATCH_SIZE = shipped
    print(host())
    print(cpu_features())
    print(conditions())


if __name__ == "__main__":
    main()
