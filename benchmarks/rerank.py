"""Reranking with the reader on SciFact: nDCG@10 and what it costs, beside the default.

    python -m benchmarks.rerank [--depths 0 20 50] [--train 200]

The SciFact knowledge base of ``benchmarks.scifact`` (built, or reused from
``.bench/scifact-default.db``) is searched hybrid (dense + BM25, convex fusion) with
``rerank`` 0 (the default, off) and each depth given: the fused top ``depth`` abstracts are
reordered by the reader (``reading.relevance``: the best of P(answers) + P(contradicts) over an
abstract's first three windows). Rows: nDCG@10 and recall@5 on ``--train`` train claims (where a
depth would be chosen) and on the 300 test claims (the report), with the p50 / p99 time to
retrieve one claim (embedding excluded, one question at a time, the reader's remembered
readings cleared between depths). Reranking stays off unless it pays for its time.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import replace

import numpy as np
from tqdm import tqdm

from benchmarks.benchcache import build_or_reuse, conditions, host, p50_p99, shared_data
from benchmarks.scifact import load
from citewise.calibrate import evaluation
from citewise.embedders import get_embedder
from citewise.ingest.documents import load_beir
from citewise.reader import get_reader


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--depths", type=int, nargs="+", default=[0, 20, 50])
    ap.add_argument("--train", type=int, default=200, help="train claims scored (the first N)")
    args = ap.parse_args()
    data = shared_data("scifact")
    corpus = data / "corpus.jsonl"
    rows = len(corpus.read_text().splitlines())
    with tqdm(total=rows, unit="doc", desc="ingest scifact", leave=False) as bar:
        built = build_or_reuse("scifact", lambda: load_beir(corpus), progress=bar.update)
    engine, kb = built.engine, built.kb
    splits = {"train": load(data, "train")[: args.train], "test": load(data, "test")}
    model = get_embedder(kb.config.embedder)
    vectors = {name: model.embed([q.query for q in qs]) for name, qs in splits.items()}
    reader = get_reader("citewise-reader")
    assert reader is not None
    reader.warm()
    print(host())
    print(f"SciFact: {built.chunks:,} chunks; hybrid retrieval, {kb.config.retrieval.fusion} fusion")
    print(f"{'rerank':>6} {'split':<6} {'n':>4} {'nDCG@10':>8} {'recall@5':>9} {'ms p50/p99':>14}")
    found: dict[str, dict[int, float]] = {}
    for depth in args.depths:
        settings = replace(kb.config.retrieval, rerank=depth)
        for name, queries in splits.items():
            reader.forget()  # each depth pays for its own reading
            report = evaluation.evaluate(engine, kb, queries, ["hybrid"], settings,
                                         vectors=vectors[name], answers=False)
            ms = [r.retrieve_ms["hybrid"] for r in report.results]
            m = report.means["hybrid"]
            found.setdefault(name, {})[depth] = m["ndcg@10"]
            print(f"{depth:>6} {name:<6} {len(queries):>4} {m['ndcg@10']:>8.3f} {m['recall@5']:>9.3f} "
                  f"{p50_p99(ms):>14}")
    print(conditions())
    best = max(found["train"], key=lambda d: found["train"][d])
    print(json.dumps({"chosen_on_train": best, "test_ndcg": found["test"]}))
    gain = found["test"].get(best, np.nan) - found["test"].get(0, np.nan)
    print(f"depth chosen on train: {best}; its test nDCG@10 gain over no reranking: {gain:+.3f}")


if __name__ == "__main__":
    main()
