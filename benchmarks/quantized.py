"""Faster graphs than float32 for the local model, and what each costs in agreement.

    python -m benchmarks.quantized [--docs 256] [--threads 2]

The issue that moved embedding to ONNX Runtime allows a checked fp16 or int8 graph only where
its vectors agree with the float32 reference at cosine >= 0.999. This builds the shipped
float32 graph (``bert_onnx.build_graph``) and variants of it on the same weights, embeds the
first ``--docs`` SciFact abstracts (title and text, cut at the model's 256 pieces, batches of
32 sorted by length, as ingest runs them) with each, and prints CPU seconds, speed against
float32, the lowest and median cosine with float32's vectors, and the lowest cosine of a text
embedded alone against the same text in its batch (a dynamic scale per batch makes a text's
vector depend on its neighbours):

- ``int8 blockwise``: every linear layer after attention's QKV as ``MatMulNBits`` (8-bit
  weights, one scale per 32 weights; activations quantised per block of 32, accuracy level 4).
- ``int8 dynamic``: the same layers as ``DynamicQuantizeMatMul`` (int8 weights per output
  channel, activations with one dynamic scale per batch), each input first divided by
  SmoothQuant factors (alpha 0.5, from the activation ranges of 64 abstracts far from the
  ones measured) so outlier channels do not set the scale.
- ``int8 dynamic, fp32 down``: the same, keeping the feed-forward down projection (its input
  is GELU's heavy-tailed output) in float32.

The calibration abstracts (4,000-4,063) are not among the measured ones (the first ``--docs``).

2026-12-01, 256 abstracts, 2 threads; other work on the machine was paused for the run (the
one-minute load average, 3.85 at the end, was still falling from it); CPU seconds are this
process's, so the speeds are ratios within one run:

    graph                         CPU s  speed  cos min  cos median  alone/batch min
    float32 (shipped)              9.54  1.00x  1.00000    1.000000          1.00000
    int8 blockwise                12.24  0.78x  0.99977    0.999856          1.00000
    int8 dynamic                   6.46  1.48x  0.97904    0.987382          0.99398
    int8 dynamic, fp32 down        8.59  1.11x  0.99929    0.999627          0.99916

2026-12-07 19:05, the same command on an idle 2-core AMD EPYC with AVX2 and no AVX-512 (no
VNNI), where int8 products are no faster than float32 ones:

    graph                         CPU s  speed  cos min  cos median  alone/batch min
    float32 (shipped)              9.92  1.00x  1.00000    1.000000          1.00000
    int8 blockwise                17.94  0.55x  0.99977    0.999856          1.00000
    int8 dynamic                  10.01  0.99x  0.94989    0.975569          0.97561
    int8 dynamic, fp32 down        9.81  1.01x  0.97322    0.987695          0.98124

On the first host, none is both faster and within 0.999: the blockwise kernel agrees but is
slower than float32 at ingest's batch shapes; the fast per-batch kernel drifts below 0.98 through the down
projection, and without it gains about a tenth.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from benchmarks.benchcache import shared_data
from citewise.embedders import bert_onnx
from citewise.embedders.local import LocalEmbedder, pad
from citewise.embedders.local_onnx import open_session

BLOCK = 32
CALIBRATION = range(4000, 4064)


def abstracts(model_dir: Any, picks: range) -> list[list[int]]:
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
    out = []
    with (shared_data("scifact") / "corpus.jsonl").open() as f:
        for i, line in enumerate(f):
            if i >= picks.stop:
                break
            if i in picks:
                doc = json.loads(line)
                out.append(tokenizer.encode(f"{doc['title']}. {doc['text']}").ids)
    return [r if len(r) <= 256 else r[:255] + r[-1:] for r in out]


def run(session: Any, rows: list[list[int]], outputs: list[str] | None = None) -> np.ndarray:
    order = sorted(range(len(rows)), key=lambda i: -len(rows[i]))
    out = np.zeros((len(rows), 384), np.float32)
    for start in range(0, len(order), 32):
        part = order[start : start + 32]
        ids, mask = pad([rows[i] for i in part])
        out[part] = session.run(outputs or ["embedding"], {"input_ids": ids, "attention_mask": mask})[0]
    return out


def linear_nodes(model: Any, skip: tuple[str, ...]) -> list[Any]:
    """The graph's MatMul nodes on a weight (attention's output, FFN up and down), minus ``skip``."""
    weights = {i.name for i in model.graph.initializer}
    return [n for n in model.graph.node if n.op_type == "MatMul" and n.input[1] in weights
            and not n.name.endswith(skip)]


def input_ranges(build: Callable[[], Any], nodes: list[Any], rows: list[list[int]],
                 threads: int) -> dict[str, np.ndarray]:
    """Per node input, the largest absolute value of each channel over ``rows``' real tokens."""
    from onnx import TensorProto, helper

    probe = build()
    names = [n.input[0] for n in nodes]
    probe.graph.output.extend(helper.make_tensor_value_info(x, TensorProto.FLOAT, None) for x in names)
    session = open_session(probe.SerializeToString(), threads)
    top: dict[str, np.ndarray] = {}
    for start in range(0, len(rows), 16):
        ids, mask = pad(rows[start : start + 16])
        values = session.run(names, {"input_ids": ids, "attention_mask": mask})
        for name, value in zip(names, values, strict=True):
            seen = np.abs(value[mask.astype(bool)]).max(0)
            top[name] = np.maximum(top.get(name, seen), seen)
    return top


def quantise(model: Any, nodes: list[Any], ranges: dict[str, np.ndarray] | None) -> Any:
    """``nodes`` rewritten in int8: blockwise without ``ranges``, else dynamic with SmoothQuant."""
    from onnx import helper, numpy_helper

    weights = {i.name: i for i in model.graph.initializer}
    chosen = {id(n) for n in nodes}
    rewritten = []
    for node in model.graph.node:
        if id(node) not in chosen:
            rewritten.append(node)
            continue
        w = numpy_helper.to_array(weights[node.input[1]]).astype(np.float32)  # [K, N]
        k, n = w.shape
        base = node.input[1]
        if ranges is None:
            blocks = w.T.reshape(n, k // BLOCK, BLOCK)
            scale = np.maximum(np.abs(blocks).max(-1), 1e-12) / 127.0
            q = (np.clip(np.round(blocks / scale[..., None]), -127, 127) + 128).astype(np.uint8)
            flat = scale.reshape(-1).astype(np.float32)
            model.graph.initializer.extend([numpy_helper.from_array(q, base + ".q"),
                                            numpy_helper.from_array(flat, base + ".s")])
            rewritten.append(helper.make_node(
                "MatMulNBits", [node.input[0], base + ".q", base + ".s"], list(node.output), name=node.name,
                domain="com.microsoft", K=k, N=n, bits=8, block_size=BLOCK, accuracy_level=4))
            continue
        seen = np.maximum(ranges[node.input[0]], 1e-5)
        smooth = np.sqrt(seen) / np.sqrt(np.maximum(np.abs(w).max(1), 1e-5))  # alpha 0.5
        ws = w * smooth[:, None]
        scale = np.abs(ws).max(0) / 127.0
        q = np.clip(np.round(ws / scale), -127, 127).astype(np.int8)
        inverse = (1 / smooth).astype(np.float32)
        model.graph.initializer.extend([numpy_helper.from_array(inverse, base + ".inv"),
                                        numpy_helper.from_array(q, base + ".q"),
                                        numpy_helper.from_array(scale.astype(np.float32), base + ".s")])
        rewritten.append(helper.make_node("Mul", [node.input[0], base + ".inv"], [node.name + ".smooth"],
                                          name=node.name + ".smooth"))
        rewritten.append(helper.make_node(
            "DynamicQuantizeMatMul", [node.name + ".smooth", base + ".q", base + ".s"],
            list(node.output), name=node.name, domain="com.microsoft"))
    del model.graph.node[:]
    model.graph.node.extend(rewritten)
    return model


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--docs", type=int, default=256, help="abstracts to embed [default: 256]")
    parser.add_argument("--threads", type=int, default=2, help="intra-op threads [default: 2]")
    args = parser.parse_args()
    model = LocalEmbedder()
    weights, config = bert_onnx.load(model.path)

    def build() -> Any:
        return bert_onnx.build_graph(weights, config, model.model)

    rows = abstracts(model.path, range(args.docs))
    calibration = abstracts(model.path, CALIBRATION)
    every = linear_nodes(build(), ())
    ranges = input_ranges(build, every, calibration, args.threads)

    def variant(skip: tuple[str, ...], smooth: dict[str, np.ndarray] | None) -> Any:
        graph = build()
        return quantise(graph, linear_nodes(graph, skip), smooth)

    graphs = {
        "float32 (shipped)": build(),
        "int8 blockwise": variant((), None),
        "int8 dynamic": variant((), ranges),
        "int8 dynamic, fp32 down": variant((".down",), ranges),
    }
    reference: np.ndarray | None = None
    base_cpu = 0.0
    print(f"{'graph':<28} {'CPU s':>6} {'speed':>6} {'cos min':>8} {'cos median':>11} "
          f"{'alone/batch min':>16}")
    for label, graph in graphs.items():
        session = open_session(graph.SerializeToString(), args.threads)
        run(session, rows[:32])  # warm
        cpu = time.process_time()
        vectors = run(session, rows)
        cpu = time.process_time() - cpu
        if reference is None:
            reference, base_cpu = vectors, cpu
        cos = (vectors * reference).sum(1)
        alone = np.vstack([run(session, [r]) for r in rows[:32]])
        print(f"{label:<28} {cpu:>6.2f} {base_cpu / cpu:>5.2f}x {cos.min():>8.5f} {np.median(cos):>11.6f} "
              f"{(alone * vectors[:32]).sum(1).min():>16.5f}")
    print(f"load average {os.getloadavg()[0]:.2f}; CPU time is this process's")


if __name__ == "__main__":
    main()
