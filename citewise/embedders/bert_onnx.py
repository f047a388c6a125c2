"""A BERT encoder written as an ONNX graph straight from its safetensors weights, without torch.

The graph takes ``input_ids`` and ``attention_mask`` (int64, [batch, tokens], both axes
dynamic) and gives ``tokens``, the last hidden state [batch, tokens, dim], and ``embedding``,
its mean over the masked tokens scaled to unit length [batch, dim]: what sentence-transformers
computes for a (Transformer, mean Pooling, Normalize) model. Token type ids are all zero, as
sentence-transformers passes them for one-segment input. Everything is float32: the weights
are copied as they are, no quantisation.

A safetensors file is an 8-byte little-endian header length, a JSON header naming each
tensor's dtype, shape and byte span, then the raw little-endian tensors; it is read with numpy.
"""

from __future__ import annotations

import json
import math
import struct
from pathlib import Path
from typing import Any

import numpy as np

from citewise.errors import EmbedderError

OPSET = 17
DTYPES = {"F32": np.float32, "F16": np.float16, "I64": np.int64, "I32": np.int32}


def read_safetensors(path: Path) -> dict[str, np.ndarray]:
    """Every tensor in the file, as read-only numpy arrays over one memory map."""
    with path.open("rb") as f:
        (size,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(size))
    data = np.memmap(path, dtype=np.uint8, mode="r", offset=8 + size)
    out: dict[str, np.ndarray] = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        if info["dtype"] not in DTYPES:
            raise EmbedderError(f"{path}: tensor {name} has dtype {info['dtype']}, not one this reads")
        start, end = info["data_offsets"]
        dtype = np.dtype(DTYPES[info["dtype"]]).newbyteorder("<")
        out[name] = data[start:end].view(dtype).reshape(info["shape"])
    return out


def build_graph(weights: dict[str, np.ndarray], config: dict[str, Any], name: str,
                fused: bool = True, pair: bool = False) -> Any:
    """The encoder, mean pooling and L2 normalisation as one ``onnx.ModelProto``; ``fused``
    writes each layer with ONNX Runtime's fused CPU operators, else with standard ONNX ones.

    With ``pair`` it is a cross-encoder instead: a third input, ``token_type_ids``, tells the
    two segments apart, and the one output, ``logits`` [batch, labels], is the linear layer
    ``head.weight``/``head.bias`` on the first token's last hidden state."""
    from onnx import TensorProto, helper, numpy_helper

    hidden = int(config["hidden_size"])
    heads = int(config["num_attention_heads"])
    layers = int(config["num_hidden_layers"])
    eps = float(config.get("layer_norm_eps", 1e-12))
    if config.get("hidden_act", "gelu") != "gelu" or config.get("position_embedding_type",
                                                                "absolute") != "absolute":
        raise EmbedderError(f"{name}: only BERT with gelu and absolute positions can be built")
    prefix = "bert." if "bert.embeddings.word_embeddings.weight" in weights else ""
    nodes: list[Any] = []
    inits: list[Any] = []

    def const(key: str, value: np.ndarray) -> str:
        inits.append(numpy_helper.from_array(np.ascontiguousarray(value), key))
        return key

    def w(key: str, transpose: bool = False) -> str:
        try:
            array = np.asarray(weights[prefix + key], dtype=np.float32)
        except KeyError:
            raise EmbedderError(f"{name}: the weights have no tensor {prefix + key}") from None
        return const(key, array.T if transpose else array)

    def op(kind: str, inputs: list[str], out: str, **attrs: Any) -> str:
        nodes.append(helper.make_node(kind, inputs, [out], name=out, **attrs))
        return out

    def norm(x: str, key: str, out: str) -> str:
        return op("LayerNormalization", [x, w(f"{key}.weight"), w(f"{key}.bias")], out,
                  axis=-1, epsilon=eps)

    def dense(x: str, key: str, out: str) -> str:
        product = op("MatMul", [x, w(f"{key}.weight", transpose=True)], f"{out}.mm")
        return op("Add", [product, w(f"{key}.bias")], out)

    def ms(kind: str, inputs: list[str], out: str, **attrs: Any) -> str:
        nodes.append(helper.make_node(kind, inputs, [out], name=out, domain="com.microsoft", **attrs))
        return out

    def fused_layer(x: str, key: str, t: str) -> str:
        """One encoder layer on ONNX Runtime's fused CPU kernels (the same arithmetic in fp32):
        Attention over one QKV product, SkipLayerNormalization (residual, bias and LayerNorm in
        one pass) and BiasGelu (exact, erf)."""
        parts = [f"{key}.attention.self.{kind}" for kind in ("query", "key", "value")]
        try:
            qkv = np.concatenate([np.asarray(weights[prefix + p + ".weight"]).T for p in parts], axis=1)
            qkv_bias = np.concatenate([np.asarray(weights[prefix + p + ".bias"]) for p in parts])
        except KeyError as e:
            raise EmbedderError(f"{name}: the weights have no tensor {e}") from None
        attended = ms("Attention", [x, const(f"{key}.qkv.weight", qkv.astype(np.float32)),
                                    const(f"{key}.qkv.bias", qkv_bias.astype(np.float32)), "mask.i32"],
                      f"{t}.attn.ctx", num_heads=heads)
        out = op("MatMul", [attended, w(f"{key}.attention.output.dense.weight", transpose=True)], f"{t}.attn")
        ln = f"{key}.attention.output.LayerNorm"
        x = ms("SkipLayerNormalization", [out, x, w(f"{ln}.weight"), w(f"{ln}.bias"),
                                          w(f"{key}.attention.output.dense.bias")],
               f"{t}.attn.out", epsilon=eps)
        up = op("MatMul", [x, w(f"{key}.intermediate.dense.weight", transpose=True)], f"{t}.up")
        act = ms("BiasGelu", [up, w(f"{key}.intermediate.dense.bias")], f"{t}.gelu")
        down = op("MatMul", [act, w(f"{key}.output.dense.weight", transpose=True)], f"{t}.down")
        ln = f"{key}.output.LayerNorm"
        return ms("SkipLayerNormalization", [down, x, w(f"{ln}.weight"), w(f"{ln}.bias"),
                                             w(f"{key}.output.dense.bias")], f"{t}.out", epsilon=eps)

    # embeddings: word + position (0..tokens-1) + token type 0, then LayerNorm
    count = op("Shape", ["input_ids"], "ids.count", start=1, end=2)  # [tokens]
    word = op("Gather", [w("embeddings.word_embeddings.weight"), "input_ids"], "emb.word", axis=0)
    pos = op("Slice", [w("embeddings.position_embeddings.weight"), const("zero1", np.array([0])),
                       count, const("axis0", np.array([0]))], "emb.pos")
    if pair:
        type_rows = op("Gather", [w("embeddings.token_type_embeddings.weight"), "token_type_ids"],
                       "emb.type", axis=0)
    else:
        type_rows = const("emb.type0", np.asarray(
            weights[prefix + "embeddings.token_type_embeddings.weight"][0], dtype=np.float32))
    summed = op("Add", [op("Add", [word, pos], "emb.word_pos"), type_rows], "emb.sum")
    x = norm(summed, "embeddings.LayerNorm", "emb.out")

    mask_f = op("Cast", ["attention_mask"], "mask.f", to=TensorProto.FLOAT)
    size = hidden // heads
    if fused:  # Attention reads the 0/1 mask itself
        op("Cast", ["attention_mask"], "mask.i32", to=TensorProto.INT32)
    else:  # the attention bias: 0 where a token is kept, float32's minimum where it is padding
        const("f.one", np.array(1.0, dtype=np.float32))
        keep = op("Unsqueeze", [mask_f, const("axes12", np.array([1, 2], dtype=np.int64))], "mask.b11t")
        const("f.min", np.array(np.finfo(np.float32).min, dtype=np.float32))
        bias = op("Mul", [op("Sub", ["f.one", keep], "mask.inv"), "f.min"], "mask.bias")
        const("split", np.array([0, 0, heads, size], dtype=np.int64))
        const("merge", np.array([0, 0, hidden], dtype=np.int64))
        const("scale", np.array(1.0 / math.sqrt(size), dtype=np.float32))
        const("sqrt2", np.array(math.sqrt(2.0), dtype=np.float32))
        const("half", np.array(0.5, dtype=np.float32))
    for i in range(layers):
        key, t = f"encoder.layer.{i}", f"l{i}"
        if fused:
            x = fused_layer(x, key, t)
            continue

        def head_view(kind: str, perm: list[int], key: str = key, t: str = t, x: str = x) -> str:
            flat = dense(x, f"{key}.attention.self.{kind}", f"{t}.{kind}")
            return op("Transpose", [op("Reshape", [flat, "split"], f"{t}.{kind}.heads")],
                      f"{t}.{kind}.t", perm=perm)

        q = head_view("query", [0, 2, 1, 3])
        k = head_view("key", [0, 2, 3, 1])
        v = head_view("value", [0, 2, 1, 3])
        scores = op("Mul", [op("MatMul", [q, k], f"{t}.qk"), "scale"], f"{t}.scaled")
        probs = op("Softmax", [op("Add", [scores, bias], f"{t}.masked")], f"{t}.probs", axis=-1)
        context = op("Transpose", [op("MatMul", [probs, v], f"{t}.ctx")], f"{t}.ctx.t", perm=[0, 2, 1, 3])
        merged = op("Reshape", [context, "merge"], f"{t}.ctx.merged")
        attended = dense(merged, f"{key}.attention.output.dense", f"{t}.attn")
        x = norm(op("Add", [attended, x], f"{t}.attn.res"), f"{key}.attention.output.LayerNorm",
                 f"{t}.attn.out")
        up = dense(x, f"{key}.intermediate.dense", f"{t}.up")
        # exact gelu: x * 0.5 * (1 + erf(x / sqrt 2)), as BERT's "gelu" is
        erf = op("Erf", [op("Div", [up, "sqrt2"], f"{t}.gelu.div")], f"{t}.gelu.erf")
        gate = op("Mul", [op("Add", [erf, "f.one"], f"{t}.gelu.add"), "half"], f"{t}.gelu.gate")
        act = op("Mul", [up, gate], f"{t}.gelu")
        down = dense(act, f"{key}.output.dense", f"{t}.down")
        x = norm(op("Add", [down, x], f"{t}.res"), f"{key}.output.LayerNorm", f"{t}.out")
    ids_shape = ["batch", "tokens"]
    inputs = [helper.make_tensor_value_info(n, TensorProto.INT64, ids_shape)
              for n in ("input_ids", "attention_mask", *(("token_type_ids",) if pair else ()))]
    if pair:
        # the first token's state: Gather at [0] on the token axis, then that axis squeezed
        # (an initializer is never 0-d here: ``const`` makes it [1])
        picked = op("Gather", [x, const("first", np.array([0], dtype=np.int64))], "first.picked", axis=1)
        first = op("Squeeze", [picked, const("axis1", np.array([1], dtype=np.int64))], "first.token")
        labels = int(np.asarray(weights["head.weight"]).shape[0])
        dense(first, "head", "logits")
        outputs = [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", labels])]
        return _model(helper.make_graph(nodes, name, inputs, outputs, inits))
    op("Identity", [x], "tokens")

    # mean pooling over the mask, then unit length (sentence-transformers' clamps: 1e-9, 1e-12)
    mask3 = op("Unsqueeze", [mask_f, const("axis2", np.array([2], dtype=np.int64))], "mask.bt1")
    const("axis1", np.array([1], dtype=np.int64))
    total = op("ReduceSum", [op("Mul", [x, mask3], "pool.masked"), "axis1"], "pool.sum", keepdims=0)
    counted = op("ReduceSum", [mask3, "axis1"], "pool.count", keepdims=0)
    const("tiny", np.array(1e-9, dtype=np.float32))
    mean = op("Div", [total, op("Max", [counted, "tiny"], "pool.count.clamped")], "pool.mean")
    length = op("ReduceL2", [mean], "norm.length", axes=[1], keepdims=1)  # axes: an attribute < opset 18
    const("eps", np.array(1e-12, dtype=np.float32))
    op("Div", [mean, op("Max", [length, "eps"], "norm.clamped")], "embedding")

    graph = helper.make_graph(
        nodes, name, inputs,
        [helper.make_tensor_value_info("embedding", TensorProto.FLOAT, ["batch", hidden]),
         helper.make_tensor_value_info("tokens", TensorProto.FLOAT, ["batch", "tokens", hidden])],
        inits,
    )
    return _model(graph)


def _model(graph: Any) -> Any:
    from onnx import helper

    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET),
                                                    helper.make_opsetid("com.microsoft", 1)],
                              producer_name="citewise")
    model.ir_version = 8  # readable by every onnxruntime since 1.10
    return model


def load(model_dir: Path) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """The weights and config.json of the BERT model in ``model_dir``."""
    config = json.loads((model_dir / "config.json").read_text())
    return read_safetensors(model_dir / "model.safetensors"), config


def save(model: Any, out: Path) -> Path:
    """Write the graph ``model`` to ``out``, a file of a few kilobytes, and its weights beside
    it to ``out`` + ``.data``, which ONNX Runtime maps into memory instead of parsing (a third
    of the load time). Returns the weights' path."""
    import onnx

    data = out.with_name(out.name + ".data")
    onnx.save_model(model, str(out), save_as_external_data=True, all_tensors_to_one_file=True,
                    location=data.name, size_threshold=1024)
    return data
