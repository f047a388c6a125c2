"""Rows per model call at ingest: how many chunks the local model reads at once, per path.

    python -m benchmarks.embed_batches [--docs 800] [--sizes 32,16,8,4] [--paths PATH,...]

Ingest embeds each group of ``EMBED_BATCH_CHUNKS`` chunks in one ``embed_tokens`` call, whose
rows (a chunk's word pieces, or its pieces when it is longer than the model reads) are run
longest first, ``BATCH_SIZE`` at a time, each batch padded to its longest row. Fewer rows a
batch pad less; more give the kernels bigger products. This chunks the first ``--docs``
SciFact abstracts as ingest does (the shipped chunker, title lines included), cuts them into the
groups ingest makes, and times running every group's rows at each batch size on each path the
host offers (``--paths`` picks some), after one warm-up group: ``embed_tokens``, so the word
pieces made and the model run, not chunking, pooling or writing. "padding" is the share of
computed positions that are padding.

2026-12-07 19:12-19:22, first 800 SciFact abstracts (14 calls, 1,782 rows, 370,658 word pieces),
idle 2-core AMD EPYC, 2246 MHz (AVX2, no AVX-512: OpenVINO computes FP32 and INT8), load
average 1.9 before the run (2.0 during it: its own two threads), process CPU time 1,083 s:

    path               batch  padding  model s  word pieces/s
    onnxruntime-fp32      32     7.6%     73.2          5,063
    onnxruntime-fp32      16     4.0%     63.0          5,884
    onnxruntime-fp32       8     2.0%     61.5          6,024
    onnxruntime-fp32       4     0.9%     61.8          5,999
    openvino-f32          32     7.6%     67.2          5,516
    openvino-f32          16     4.0%     63.1          5,878
    openvino-f32           8     2.0%     62.1          5,972
    openvino-f32           4     0.9%     63.5          5,837

Eight rows pad a quarter as much as 32 and lose nothing to smaller products; four pad less
again but their kernels start to cost more. ``BATCH_SIZE`` is 8 (it was 32: -16% time on ONNX
Runtime here, -8% on OpenVINO).
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


def groups(docs: int) -> list[list[str]]:
    """The texts of each ``embed_tokens`` call ingest makes for the first ``docs`` SciFact
    abstracts (each chunk's text with its title line)."""
    chunker = chunker_for(DEFAULT_EMBEDDER, "sections")
    texts: list[list[str]] = [[]]
    for doc in itertools.islice(load_beir(shared_data("scifact") / "corpus.jsonl"), docs):
        if isinstance(doc, Skipped):
            continue
        texts[-1] += [c.embed_text for c in chunker.chunk(doc)]
        if len(texts[-1]) >= EMBED_BATCH_CHUNKS:
            texts.append([])
    return [group for group in texts if group]


def padding(lengths: list[list[int]], size: int) -> float:
    """The share of positions computed that are padding, each call's rows (their lengths)
    sorted and batched as ``LocalEmbedder`` runs them."""
    real = padded = 0
    for call in lengths:
        ordered = sorted(call, reverse=True)
        real += sum(ordered)
        padded += sum(ordered[i] * len(ordered[i: i + size]) for i in range(0, len(ordered), size))
    return 1 - real / padded


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--docs", type=int, default=800, help="the first N SciFact abstracts")
    ap.add_argument("--sizes", default="32,16,8,4", help="rows per batch to time")
    ap.add_argument("--paths", default="", help="execution paths [default: every one offered]")
    args = ap.parse_args()
    model = get_embedder(DEFAULT_EMBEDDER)
    assert isinstance(model, local.LocalEmbedder)
    calls = groups(args.docs)
    # a row: a piece of a text the model reads whole, its two special tokens included
    lengths = [[model.count_tokens(p) + 2 for p in split_all(call, model.pieces)[0]] for call in calls]
    pieces = sum(map(sum, lengths))
    print(f"{args.docs} abstracts: {len(calls)} calls, {sum(map(len, lengths)):,} rows, "
          f"{pieces:,} word pieces")
    print(f"{'path':18} {'batch':>5}  padding  model s  word pieces/s")
    shipped = local.BATCH_SIZE
    try:
        for path in [p for p in args.paths.split(",") if p] or runtimes.offered():
            on_path = model.on_path(path)
            for size in map(int, args.sizes.split(",")):
                local.BATCH_SIZE = size
                on_path.embed_tokens(calls[0])  # warm: kernels planned for this size
                started = time.perf_counter()
                for call in calls:
                    on_path.embed_tokens(call)
                took = time.perf_counter() - started
                print(f"{path:18} {size:5} {padding(lengths, size):8.1%} {took:8.1f} "
                      f"{pieces / took:14,.0f}", flush=True)
    finally:
        local.BATCH_SIZE = shipped
    print(host())
    print(cpu_features())
    print(conditions())


if __name__ == "__main__":
    main()
