"""The reader in torch, for training only: MiniLM's BERT encoder (from the installed
all-MiniLM-L6-v2 weights, the word embeddings frozen so the package need not ship them) and a
linear head on the first token giving three logits: NEITHER, ANSWERS, CONTRADICTS."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import torch
from torch import nn

from citewise.embedders.bert_onnx import read_safetensors

LABELS = 3
WORDS = "embeddings.word_embeddings.weight"


class Layer(nn.Module):
    def __init__(self, hidden: int, heads: int, inner: int, eps: float) -> None:
        super().__init__()
        self.heads = heads
        self.query, self.key, self.value = (nn.Linear(hidden, hidden) for _ in range(3))
        self.attn_out, self.attn_norm = nn.Linear(hidden, hidden), nn.LayerNorm(hidden, eps=eps)
        self.up, self.down = nn.Linear(hidden, inner), nn.Linear(inner, hidden)
        self.out_norm = nn.LayerNorm(hidden, eps=eps)

    def forward(self, x: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
        b, t, h = x.shape
        size = h // self.heads

        def split(y: torch.Tensor) -> torch.Tensor:
            return y.view(b, t, self.heads, size).transpose(1, 2)

        q, k, v = split(self.query(x)), split(self.key(x)), split(self.value(x))
        scores = q @ k.transpose(-1, -2) / math.sqrt(size) + bias
        context = (scores.softmax(-1) @ v).transpose(1, 2).reshape(b, t, h)
        x = self.attn_norm(x + self.attn_out(context))
        return self.out_norm(x + self.down(nn.functional.gelu(self.up(x))))


class Reader(nn.Module):
    def __init__(self, config: dict, layers: int) -> None:
        super().__init__()
        hidden, eps = config["hidden_size"], config.get("layer_norm_eps", 1e-12)
        self.words = nn.Embedding(config["vocab_size"], hidden)
        self.words.weight.requires_grad_(False)
        self.positions = nn.Embedding(config["max_position_embeddings"], hidden)
        self.types = nn.Embedding(config["type_vocab_size"], hidden)
        self.norm = nn.LayerNorm(hidden, eps=eps)
        self.layers = nn.ModuleList(Layer(hidden, config["num_attention_heads"],
                                          config["intermediate_size"], eps) for _ in range(layers))
        self.head = nn.Linear(hidden, LABELS)

    def forward(self, ids: torch.Tensor, types: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        positions = torch.arange(ids.shape[1], device=ids.device)
        x = self.norm(self.words(ids) + self.positions(positions) + self.types(types))
        bias = (1.0 - mask[:, None, None, :].float()) * torch.finfo(torch.float32).min
        for layer in self.layers:
            x = layer(x, bias)
        return self.head(x[:, 0])


# our parameter names -> the BERT checkpoint's (``{i}`` is the layer)
NAMES = {
    "words.weight": WORDS,
    "positions.weight": "embeddings.position_embeddings.weight",
    "types.weight": "embeddings.token_type_embeddings.weight",
    "norm.weight": "embeddings.LayerNorm.weight", "norm.bias": "embeddings.LayerNorm.bias",
}
LAYER_NAMES = {
    "query": "attention.self.query", "key": "attention.self.key", "value": "attention.self.value",
    "attn_out": "attention.output.dense", "attn_norm": "attention.output.LayerNorm",
    "up": "intermediate.dense", "down": "output.dense", "out_norm": "output.LayerNorm",
}


def bert_name(ours: str) -> str:
    """The BERT checkpoint's name for one of our parameters (the head keeps its own name)."""
    if ours in NAMES:
        return NAMES[ours]
    if ours.startswith("layers."):
        _, i, part, kind = ours.split(".")
        return f"encoder.layer.{i}.{LAYER_NAMES[part]}.{kind}"
    return ours


def from_minilm(model_dir: Path, config: dict, layers: int) -> Reader:
    """A reader whose encoder starts as MiniLM's first ``layers`` layers, its head at random."""
    model = Reader(config, layers)
    weights = read_safetensors(model_dir / "model.safetensors")
    state = model.state_dict()
    for ours in state:
        if not ours.startswith("head."):
            state[ours] = torch.from_numpy(np.array(weights[bert_name(ours)], dtype=np.float32))
    model.load_state_dict(state)
    return model
