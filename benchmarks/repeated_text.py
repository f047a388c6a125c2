"""What the repeated text in embedded chunks buys: the title line and the sentence overlap.

    python -m benchmarks.repeated_text [--data ../shared/data/scifact] [--variants on:2,off:0]
                                       [--docs N]

Every ``sections`` chunk is embedded with its document's title and heading path on lines above
its text (``KBConfig.embed_headings``, default on; on SciFact the title is the only such line),
and a paragraph longer than the model's 254 word pieces is split at sentences with the last two
sentences of each piece repeated at the top of the next (``SectionsChunker(overlap=2)``). Both
are word pieces the model reads again (issue #32): on SciFact ~467 a abstract where its text
alone is ~309.

For each variant, title line {on, off} x overlap {2, 1, 0} sentences (``--variants`` picks some;
"on:2" is what citewise ships), this builds (or reuses, from ``.bench/``: ``benchcache``):

1. SciFact, all 5,183 abstracts; scores hybrid retrieval with the knowledge base's own (default)
   settings on the 809 *train* claims and on the 300 *test* claims: nDCG@10 and recall@5,
   documents counted once at their best chunk (``calibrate.evaluation``, as ``scifact.py``).
2. The sample collection (examples/smoking-cessation, whose chunks carry a title and heading
   path); scores hybrid recall@5 of the covered questions of
   examples/queries/smoking-cessation.{train,test}.jsonl and asks every labelled question as
   ``ask`` does (shipped gate, extractive generator, citation check: ``evaluation.evaluate``
   with answers): the share of covered questions answered and of out-of-scope ones refused.
   On the sample "title off" drops the heading path too (one switch for both).

"chunks" are the store's; "pieces" are the word pieces of the texts embedded (title and heading
lines included when on), counted with the embedder's tokenizer without its two special tokens,
by chunking the documents again with the variant's chunker (the count is checked against the
store's). The decision rule reads the train split only: a variant that drops repeated text is
kept if SciFact train hybrid nDCG@10 falls by at most 0.003 from "on:2" and the sample's train
recall@5 does not fall; of those kept, the one with the fewest SciFact word pieces wins. The
test split and the sample's answers are printed beside it, not used by it.
"""

from __future__ import annotations

import argparse
import itertools
import os
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from tqdm import tqdm

from benchmarks.benchcache import ROOT, build_or_reuse, chunker_for, conditions, host, shared_data
from benchmarks.scifact import load as load_claims
from citewise.calibrate import evaluation
from citewise.calibrate.querysets import LabelledQuery, load_queries
from citewise.embedders import DEFAULT_EMBEDDER, embedder_of, get_embedder
from citewise.ingest.chunking import OVERLAP_SENTENCES
from citewise.ingest.documents import Skipped, load_beir, read_all
from citewise.records import Document

SAMPLE = ROOT / "examples" / "smoking-cessation"
QUERIES = ROOT / "examples" / "queries"
SPLITS = ("train", "test")
SHIPPED = (True, OVERLAP_SENTENCES)  # (title line, overlap)
VARIANTS = tuple(itertools.product((True, False), (2, 1, 0)))
NDCG_DROP = 0.003  # the most SciFact train nDCG@10 may fall for dropping a repeated text


def label(variant: tuple[bool, int]) -> str:
    return f"title {'on' if variant[0] else 'off'}, overlap {variant[1]}"


def parse_variants(text: str) -> list[tuple[bool, int]]:
    out = []
    for part in text.split(","):
        title, _, overlap = part.strip().partition(":")
        if title not in ("on", "off") or not overlap.isdigit():
            raise argparse.ArgumentTypeError(f"{part!r}: give title:overlap, e.g. on:2 or off:0")
        out.append((title == "on", int(overlap)))
    return out


def pieces(documents: Iterable[Path] | Iterable[Document | Skipped],
           variant: tuple[bool, int]) -> tuple[int, int]:
    """Chunks and word pieces embedded of ``documents`` with ``variant``'s chunker and lines."""
    model = get_embedder(DEFAULT_EMBEDDER)
    chunker = chunker_for(DEFAULT_EMBEDDER, "sections", variant[1])
    chunks = total = 0
    for doc in read_all(documents):
        if isinstance(doc, Skipped):
            continue
        for c in chunker.chunk(doc):
            chunks += 1
            total += model.count_tokens(c.embed_text if variant[0] else c.text)
    return chunks, total


@dataclass
class Measured:
    variant: tuple[bool, int]
    chunks: dict[str, int] = field(default_factory=dict)  # "scifact" / "sample"
    pieces: dict[str, int] = field(default_factory=dict)
    ingest_s: dict[str, float] = field(default_factory=dict)
    scifact: dict[str, dict[str, float]] = field(default_factory=dict)  # split -> hybrid means
    sample: dict[str, evaluation.EvalReport] = field(default_factory=dict)  # split -> report


def build(name: str, documents: Callable[[], Iterable], variant: tuple[bool, int], total: int,
          embed_path: str = ""):
    every = 60 if not sys.stderr.isatty() else 0.1
    with tqdm(total=total, unit="doc", desc=f"ingest {name}, {label(variant)}", leave=False,
              mininterval=every) as bar:
        return build_or_reuse(name, documents, embed_headings=variant[0], overlap=variant[1],
                              progress=bar.update, embed_path=embed_path)


def check_count(what: str, store_chunks: int, counted: int) -> None:
    if store_chunks != counted:
        print(f"  NOTE {what}: the store holds {store_chunks:,} chunks, chunking again gave "
              f"{counted:,}; word pieces are of the latter", flush=True)


def measure(variant: tuple[bool, int], corpus: Path, docs: int | None, claims: dict[str, list[LabelledQuery]],
            vectors: dict[str, dict[str, np.ndarray]], questions: dict[str, list[LabelledQuery]],
            embed_path: str = "") -> Measured:
    """``variant``'s two knowledge bases built (or reused) and scored; ``embed_path``: the local
    model's execution path they are embedded on ("": the host's fastest)."""
    m = Measured(variant)
    beir = (lambda: itertools.islice(load_beir(corpus), docs)) if docs else (lambda: load_beir(corpus))
    name = f"scifact-first{docs}" if docs else "scifact"
    t = time.perf_counter()
    built = build(name, beir, variant, docs or len(corpus.read_text().splitlines()), embed_path)
    m.ingest_s["scifact"] = built.ingest_seconds
    m.chunks["scifact"] = built.chunks
    counted, m.pieces["scifact"] = pieces(beir(), variant)
    check_count("SciFact", built.chunks, counted)
    # the claims embedded as the store's vectors were (its recorded path), once per path
    model, path = embedder_of(built.kb), built.kb.config.embed_path
    if path not in vectors:
        vectors[path] = {s: model.embed([q.query for q in claims[s]]) for s in SPLITS}
    for split in SPLITS:
        report = evaluation.evaluate(built.engine, built.kb, claims[split], ("hybrid",),
                                     vectors=vectors[path][split], answers=False)
        m.scifact[split] = report.means["hybrid"]
    built.engine.store.close()
    print(f"  SciFact: {built.path.name} {'built' if built.built else 'reused'} on "
          f"{path or 'the one path of ' + model.name} "
          f"(ingest {built.ingest_seconds:.0f} s), scored in {time.perf_counter() - t:.0f} s "
          f"all told; {conditions()}", flush=True)

    t = time.perf_counter()
    sample = build("sample", lambda: [SAMPLE], variant, sum(1 for _ in SAMPLE.glob("*.md")),
                   embed_path)
    m.ingest_s["sample"] = sample.ingest_seconds
    m.chunks["sample"] = sample.chunks
    counted, m.pieces["sample"] = pieces([SAMPLE], variant)
    check_count("sample", sample.chunks, counted)
    for split in SPLITS:
        m.sample[split] = evaluation.evaluate(sample.engine, sample.kb, questions[split], ("hybrid",))
    sample.engine.store.close()
    print(f"  sample: {sample.path.name} {'built' if sample.built else 'reused'}, asked and "
          f"scored in {time.perf_counter() - t:.0f} s; {conditions()}", flush=True)
    return m


def rate(report: evaluation.EvalReport, bucket: str) -> float:
    """The share of ``bucket``'s questions ``ask`` refused."""
    assert report.end_to_end is not None
    found = [r for r in report.end_to_end.buckets if r.bucket == bucket]
    return found[0].rate if found else float("nan")


def covered_answered(report: evaluation.EvalReport) -> float:
    return 1 - rate(report, "covered")


def pair(train: float, test: float, spec: str = ".3f", width: int = 6) -> str:
    """A train | test cell."""
    return f"{train:>{width}{spec}} |{test:>{width}{spec}}"


def table(rows: list[Measured], claims: dict[str, list[LabelledQuery]],
          questions: dict[str, list[LabelledQuery]]) -> str:
    covered = {s: sum(q.expect == "answer" for q in questions[s]) for s in SPLITS}
    scope = {s: sum(q.bucket == "out_of_scope" for q in questions[s]) for s in SPLITS}
    out = [
        f"{'':<22}{'SciFact':>17}{'sample':>16}   {'SciFact hybrid, train | test':<34}"
        f"{'sample, train | test'}",
        f"{'variant':<22}{'chunks':>7}{'pieces':>10}{'chunks':>7}{'pieces':>9}"
        f"   {'nDCG@10':>14} {'R@5':>14}     {'R@5':>14}   {'answered':>14}   {'refused':>14}",
    ]
    for m in rows:
        tr, te = m.scifact["train"], m.scifact["test"]
        st, ss = m.sample["train"], m.sample["test"]
        out.append(
            f"{label(m.variant):<22}{m.chunks['scifact']:>7,}{m.pieces['scifact']:>10,}"
            f"{m.chunks['sample']:>7,}{m.pieces['sample']:>9,}"
            f"   {pair(tr['ndcg@10'], te['ndcg@10'], '.4f')} {pair(tr['recall@5'], te['recall@5'], '.4f')}"
            f"     {pair(st.means['hybrid']['recall@5'], ss.means['hybrid']['recall@5'])}"
            f"   {pair(covered_answered(st), covered_answered(ss))}"
            f"   {pair(rate(st, 'out_of_scope'), rate(ss, 'out_of_scope'))}")
    out.append(f"(SciFact: {len(claims['train'])} | {len(claims['test'])} claims; sample: R@5 of "
               f"the covered questions, and what ask returned: covered answered "
               f"({covered['train']} | {covered['test']}), out of scope refused "
               f"({scope['train']} | {scope['test']}); pieces: word pieces embedded)")
    return "\n".join(out)


def details(rows: list[Measured]) -> str:
    """The sample's other end-to-end numbers, and the ingest times (as recorded when built)."""
    out = [f"{'variant':<22}{'thin refused':>16}{'covered with source':>21}   ingest s: SciFact, sample"
           f"   (train | test)"]
    for m in rows:
        st, ss = m.sample["train"], m.sample["test"]
        source = [r.end_to_end.with_source_share if r.end_to_end else None for r in (st, ss)]
        out.append(f"{label(m.variant):<22}   {pair(rate(st, 'thin'), rate(ss, 'thin'))}"
                   f"      {pair(source[0] or 0, source[1] or 0)}"
                   f"   {m.ingest_s['scifact']:>17.0f}{m.ingest_s['sample']:>8.1f}")
    return "\n".join(out)


def decide(rows: list[Measured]) -> str:
    """The train-split rule (module docstring): which variant keeps only what pays."""
    base = next((m for m in rows if m.variant == SHIPPED), None)
    if base is None:
        return f"decision: not made ({label(SHIPPED)}, the reference, was not measured)"
    b_ndcg = base.scifact["train"]["ndcg@10"]
    b_rec = base.sample["train"].means["hybrid"]["recall@5"]
    out = [f"decision on the train split (keep a variant if SciFact train nDCG@10 falls by at most "
           f"{NDCG_DROP} from {b_ndcg:.4f} and sample train R@5 does not fall from {b_rec:.3f}):"]
    kept = []
    for m in rows:
        d_ndcg = m.scifact["train"]["ndcg@10"] - b_ndcg
        d_rec = m.sample["train"].means["hybrid"]["recall@5"] - b_rec
        ok = d_ndcg >= -NDCG_DROP - 1e-12 and d_rec >= -1e-12
        saved = 1 - m.pieces["scifact"] / base.pieces["scifact"]
        out.append(f"  {label(m.variant):<22} nDCG@10 {d_ndcg:+.4f}  sample R@5 {d_rec:+.3f}  "
                   f"SciFact word pieces {-saved:+.1%}  {'kept' if ok else 'fails'}")
        if ok:
            kept.append(m)
    best = min(kept, key=lambda m: (m.pieces["scifact"], m.pieces["sample"]))
    out.append(f"  the rule picks: {label(best.variant)}"
               + (" (what citewise ships)" if best.variant == SHIPPED else ""))
    return "\n".join(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, help="SciFact folder (default: shared/data/scifact)")
    ap.add_argument("--variants", type=parse_variants, default=list(VARIANTS),
                    help="title:overlap pairs, comma-separated [default: all six, "
                         "on:2,on:1,on:0,off:2,off:1,off:0]")
    ap.add_argument("--docs", type=int, help="only the first N abstracts (a quick check: the "
                    "scores are then not SciFact's)")
    args = ap.parse_args()
    data = args.data or shared_data("scifact")
    print(host(), flush=True)
    print(f"started {time.strftime('%Y-%m-%d %H:%M')}; {conditions()}", flush=True)
    claims = {s: load_claims(data, s) for s in SPLITS}
    vectors: dict[str, dict[str, np.ndarray]] = {}  # the claims', per execution path
    questions = {s: load_queries(QUERIES / f"smoking-cessation.{s}.jsonl") for s in SPLITS}
    rows = []
    for variant in args.variants:
        print(f"{label(variant)} ({time.strftime('%H:%M')}, pid {os.getpid()})", flush=True)
        rows.append(measure(variant, data / "corpus.jsonl", args.docs, claims, vectors, questions))
    print()
    print(table(rows, claims, questions))
    print()
    print(details(rows))
    print()
    print(decide(rows))
    print(f"\n{host()}\nfinished {time.strftime('%Y-%m-%d %H:%M')}; {conditions()}")


if __name__ == "__main__":
    main()
