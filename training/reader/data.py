"""Training and validation pairs from the shipped data, labelled for one three-way head.

Every pair is (question or claim, passage) with a label: NEITHER (0), ANSWERS (1: the passage
answers the question or supports the claim) or CONTRADICTS (2). The passage is a window of at
most ``WINDOW_WORDS`` words cut at sentence ends (``citewise.reader.reading.windows``).

- MedQuAD (CC BY 4.0): a question with the start of its own answer (ANSWERS); with another
  section of the same page, i.e. the same topic and another question type (NEITHER, the
  "thin" case); with the same question type about another topic (NEITHER). One whole source,
  CancerGov, is held out for validation.
- SciFact train claims: a claim with its rationale sentences (ANSWERS or CONTRADICTS by the
  label), with other sentences of the cited abstract (NEITHER), and claims whose cited
  abstract gives no evidence with its sentences (NEITHER). A stable 15% of the train claims is
  held out for validation; the test claims are never read.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import random
import re
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

from citewise.reader.reading import windows
from citewise.sentences import split_sentences

NEITHER, ANSWERS, CONTRADICTS = 0, 1, 2
# the data beside the project (../shared/data), or where CITEWISE_DATA says (as for benchmarks/)
DATA = Path(os.environ.get("CITEWISE_DATA") or Path(__file__).resolve().parents[3] / "shared" / "data")
HELD_OUT_SOURCE = "CancerGov"


@dataclass(frozen=True)
class Pair:
    first: str  # the question or claim
    second: str  # the passage
    label: int
    kind: str  # where it came from, for per-kind validation figures


def clean(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


def medquad_rows(data: Path = DATA) -> list[dict[str, str]]:
    with gzip.open(data / "reader" / "medquad_train.jsonl.gz", "rt", encoding="utf-8") as f:
        rows = [json.loads(line) for line in f]
    for row in rows:
        answer = clean(row["answer"])
        row["answer"] = re.sub(r"^(Key Points|Summary)\s*-?\s*", "", answer)
    return [r for r in rows if r["answer"] and r["question"]]


def medquad_pairs(rows: list[dict[str, str]], rng: random.Random) -> list[Pair]:
    """Per question: its answer's first window, one other window of it, a section of the same
    page about another question type, and the same question type about another topic."""
    by_page: dict[str, list[dict[str, str]]] = defaultdict(list)
    by_type: dict[str, list[dict[str, str]]] = defaultdict(list)
    for row in rows:
        by_page[row["doc_id"]].append(row)
        by_type[row["qtype"]].append(row)
    pairs: list[Pair] = []
    for row in rows:
        own = windows(row["answer"])
        if not own:
            continue
        pairs.append(Pair(row["question"], own[0], ANSWERS, "medquad"))
        others = [r for r in by_page[row["doc_id"]] if r["qtype"] != row["qtype"]]
        if others:
            other = windows(rng.choice(others)["answer"])
            if other:
                pairs.append(Pair(row["question"], rng.choice(other[:3]), NEITHER, "medquad-thin"))
        same = by_type[row["qtype"]]
        for _ in range(3):
            other_row = rng.choice(same)
            if other_row["focus"] != row["focus"]:
                other = windows(other_row["answer"])
                if other:
                    pairs.append(Pair(row["question"], other[0], NEITHER, "medquad-other"))
                break
    return pairs


def held_out_claim(claim_id: str) -> bool:
    """A stable 15% of SciFact's train claims, kept for validation."""
    return int(hashlib.sha256(claim_id.encode()).hexdigest()[:8], 16) % 100 < 15


def scifact_claims(data: Path = DATA) -> list[dict]:
    """SciFact's train claims only (those in qrels/train.tsv), each with its cited ids."""
    folder = data / "scifact"
    cited: dict[str, list[str]] = defaultdict(list)
    for line in (folder / "qrels" / "train.tsv").read_text().splitlines()[1:]:
        query, doc = line.strip().split("\t")[:2]
        cited[query].append(doc)
    claims = []
    for line in (folder / "queries.jsonl").read_text().splitlines():
        row = json.loads(line)
        if row["_id"] in cited:
            row["cited"] = cited[row["_id"]]
            claims.append(row)
    return claims


def scifact_corpus(data: Path = DATA) -> dict[str, list[str]]:
    out = {}
    for line in (data / "scifact" / "corpus.jsonl").read_text().splitlines():
        row = json.loads(line)
        out[row["_id"]] = split_sentences(clean(row["text"]))
    return out


def scifact_pairs(claims: list[dict], corpus: dict[str, list[str]], rng: random.Random) -> list[Pair]:
    """A claim against its rationale (with the sentence before it when short), against two other
    sentences of the cited abstract, and a no-evidence claim against its abstract's windows."""
    pairs: list[Pair] = []
    for claim in claims:
        text = claim["text"]
        for doc in claim["cited"]:
            sentences = corpus.get(doc, [])
            if not sentences:
                continue
            evidence = claim["metadata"].get(doc, [])
            used: set[int] = set()
            for rationale in evidence:
                idx = [i for i in rationale["sentences"] if i < len(sentences)]
                if not idx:
                    continue
                used.update(idx)
                label = ANSWERS if rationale["label"] == "SUPPORT" else CONTRADICTS
                passage = " ".join(sentences[i] for i in idx)
                pairs.append(Pair(text, passage, label, "scifact"))
                if idx[0] > 0 and len(passage.split()) < 30:
                    pairs.append(Pair(text, sentences[idx[0] - 1] + " " + passage, label, "scifact"))
            rest = [s for i, s in enumerate(sentences) if i not in used]
            for sentence in rng.sample(rest, min(2, len(rest))):
                pairs.append(Pair(text, sentence, NEITHER, "scifact-neither"))
    return pairs
