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
test split and the sample's answers are printed beside it, not used by it; so is the standard
error of each variant's train nDCG@10 difference, paired by claim, to read the 0.003 against.

Measured 2026-12-05 (20:20-20:46 built, scored again 20:51-20:53 on the same stores), f9e6ec2
(stores' code 1891f87d), on the host's fastest path, openvino-bf16; host: Intel(R) Xeon(R)
Processor, 2600 MHz, 2 cores, reference loop 25-27 ms when idle (69 ms at the start: load
average 10 from others' runs, which fell to ~1 by the end, so the ingest seconds are not
comparable between rows); process CPU time 1,155 s for the build run:

                     SciFact            sample     SciFact hybrid, train | test    sample, train | test
variant               chunks    pieces chunks pieces  nDCG@10       R@5          R@5        answered   refused
title on, overlap 2   11,878 2,462,756  163  13,891  .7354|.7270  .7926|.7889  .988|1.00  .963|.937  .974|1.00
title on, overlap 1   10,590 2,094,738  163  13,830  .7305|.7302  .7954|.7873  .988|1.00  .963|.937  .974|1.00
title on, overlap 0    9,896 1,851,289  163  13,790  .7310|.7228  .7906|.8006  .988|1.00  .963|.937  .974|1.00
title off, overlap 2  11,878 2,184,140  163  11,247  .7314|.7311  .7976|.7839  1.00|1.00  .938|.949  .974|1.00
title off, overlap 1  10,590 1,850,567  163  11,186  .7334|.7243  .7998|.7806  1.00|1.00  .938|.949  .974|1.00
title off, overlap 0   9,896 1,625,637  163  11,146  .7265|.7257  .7905|.7812  1.00|1.00  .938|.949  .974|1.00
(sample: R@5 of the covered questions; covered answered of 81 | 79, out of scope refused of 38 | 39)

variant                   thin refused  covered with source   ingest s: SciFact, sample
title on, overlap 2       0.707 | 0.667       0.926 | 0.937                 544     8.2
title on, overlap 1       0.707 | 0.692       0.926 | 0.937                 300     1.8
title on, overlap 0       0.707 | 0.667       0.938 | 0.937                 184     1.5
title off, overlap 2      0.634 | 0.692       0.914 | 0.949                 178     1.3
title off, overlap 1      0.634 | 0.692       0.914 | 0.949                 114     3.3
title off, overlap 0      0.634 | 0.692       0.914 | 0.949                  78     0.7

  (train nDCG@10 vs on:2, paired SE, claims up/down; sample train R@5; SciFact word pieces)
  title on, overlap 1    -0.0049  SE 0.0025   50/49   +0.000  -14.9%  fails
  title on, overlap 0    -0.0044  SE 0.0031   58/67   +0.000  -24.8%  fails
  title off, overlap 2   -0.0040  SE 0.0033   69/64   +0.012  -11.3%  fails
  title off, overlap 1   -0.0020  SE 0.0038   70/73   +0.012  -24.9%  kept
  title off, overlap 0   -0.0089  SE 0.0040   63/100  +0.012  -34.0%  fails
  the rule picks: title off, overlap 1

Read with it: only on:1's (2.0 paired standard errors) and off:0's (2.2) train differences are
past 1.5 standard errors from none, and the order is not monotonic (off:2 fails where off:1,
with less repeated text, is kept), so the pick is the rule's, not a measured gain; on test off:1
is -0.0027 nDCG@10 and -0.0083 recall@5 from on:2. The SciFact pieces per abstract: 475 shipped,
314 with neither. On the sample, "title off" moves one train question into the top 5 but answers
76 of 81 covered train questions rather than 78 (test 75 of 79 rather than 74) and refuses fewer
thin ones (0.634 rather than 0.707 on train); the rule does not read answers. "Title off" keeps
the chunk boundaries the shipped chunker draws with the title counted in (as ingest with
``embed_headings`` off does today); sized by their text alone SciFact would have 10,323 / 9,528
/ 9,082 chunks at overlap 2 / 1 / 0 (2,065,749 / 1,808,566 / 1,625,637 pieces), not measured
here. The overlap alone, an earlier session's (train, hybrid, title on, the ONNX Runtime f32
path): 0.735 / 0.731 / 0.732, as here. Defaults are unchanged.
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
    per_claim: dict[str, np.ndarray] = field(default_factory=dict)  # split -> each claim's nDCG@10
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
        m.per_claim[split] = np.array([r.scores["hybrid"]["ndcg@10"] for r in report.results])
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
        paired = m.per_claim["train"] - base.per_claim["train"]  # the same claims, in order
        se = float(paired.std(ddof=1) / np.sqrt(len(paired))) if len(paired) > 1 else 0.0
        d_rec = m.sample["train"].means["hybrid"]["recall@5"] - b_rec
        ok = d_ndcg >= -NDCG_DROP - 1e-12 and d_rec >= -1e-12
        saved = 1 - m.pieces["scifact"] / base.pieces["scifact"]
        out.append(f"  {label(m.variant):<22} nDCG@10 {d_ndcg:+.4f} (paired SE {se:.4f}, "
                   f"{int((paired > 0).sum())} claims up, {int((paired < 0).sum())} down)  "
                   f"sample R@5 {d_rec:+.3f}  "
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
