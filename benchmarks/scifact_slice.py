"""Write the reduced SciFact slice the tests use (tests/data/scifact-slice/).

    python -m benchmarks.scifact_slice [--data ../shared/data/scifact]

The first 40 test claims (in qrels order), every document relevant to them, and distractors
drawn with a fixed seed from the rest of the corpus, 200 documents in all. Deterministic: the
same input writes the same bytes.
"""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path

from benchmarks.benchcache import shared_data

ROOT = Path(__file__).resolve().parent.parent

OUT = ROOT / "tests" / "data" / "scifact-slice"
QUERIES, DOCS, SEED = 40, 200, 3


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, help="SciFact folder (default: shared/data/scifact)")
    args = ap.parse_args()
    args.data = args.data or shared_data("scifact")
    rows = (args.data / "qrels" / "test.tsv").read_text().splitlines()[1:]
    qrels: dict[str, list[str]] = {}
    for row in rows:
        qid, doc, _ = row.strip().split("\t")
        if qid in qrels or len(qrels) < QUERIES:
            qrels.setdefault(qid, []).append(doc)
    wanted = {d for docs in qrels.values() for d in docs}
    corpus = [json.loads(line) for line in (args.data / "corpus.jsonl").open()]
    others = sorted(d["_id"] for d in corpus if d["_id"] not in wanted)
    keep = wanted | set(random.Random(SEED).sample(others, DOCS - len(wanted)))
    OUT.mkdir(parents=True, exist_ok=True)
    with (OUT / "corpus.jsonl").open("w") as f:
        for d in corpus:
            if d["_id"] in keep:
                f.write(json.dumps({"_id": d["_id"], "title": d["title"], "text": d["text"]}) + "\n")
    with (OUT / "queries.jsonl").open("w") as f:
        for line in (args.data / "queries.jsonl").open():
            q = json.loads(line)
            if q["_id"] in qrels:
                f.write(json.dumps({"_id": q["_id"], "text": q["text"]}) + "\n")
    with (OUT / "qrels.tsv").open("w", newline="") as f:
        f.write("query-id\tcorpus-id\tscore\r\n")
        for qid, docs in qrels.items():
            for doc in docs:
                f.write(f"{qid}\t{doc}\t1\r\n")
    print(f"{len(qrels)} queries, {len(keep)} documents ({len(wanted)} relevant) -> {OUT}")


if __name__ == "__main__":
    main()
