"""The clinical system's section-header ablation, for ``scifact.py --ablation``.

The sample collection (examples/smoking-cessation, real Markdown headings) is embedded twice:
with the heading path on lines of its own above each chunk (citewise's default) and without
(``KBConfig.embed_headings=False``: the chunk text alone). BM25 indexes headings either way,
so the dense mode shows the effect most directly. Both labelled splits are reported (nothing
is tuned here). SciFact has no section headings (its only heading line is the title), so it is
not repeated there.
"""

from __future__ import annotations

from pathlib import Path

from benchmarks.benchcache import ROOT, build_or_reuse
from citewise.calibrate import evaluation
from citewise.calibrate.querysets import load_queries

SAMPLE = ROOT / "examples" / "smoking-cessation"
QUERIES = ROOT / "examples" / "queries"
SHOWN = ("recall@1", "recall@5", "mrr@10", "ndcg@10")


def _paths() -> list[Path]:
    return [SAMPLE]


def headings_ablation() -> None:
    print("\nSection-header ablation: sample collection (10 documents with headings), covered questions")
    print(f"{'split':<6}{'mode':<12}{'headings':<10}" + "".join(f"{m:>10}" for m in SHOWN))
    builds = {flag: build_or_reuse("sample", _paths, embed_headings=flag) for flag in (True, False)}
    for split in ("train", "test"):
        queries = load_queries(QUERIES / f"smoking-cessation.{split}.jsonl")
        reports = {flag: evaluation.evaluate(b.engine, b.kb, queries, ("dense", "hybrid"),
                                             answers=False)
                   for flag, b in builds.items()}
        for mode in ("dense", "hybrid"):
            for flag in (True, False):
                m = reports[flag].means[mode]
                print(f"{split:<6}{mode:<12}{'on' if flag else 'off':<10}"
                      + "".join(f"{m[k]:>10.3f}" for k in SHOWN))
            on, off = reports[True].means[mode], reports[False].means[mode]
            print(f"{'':<6}{'':<12}{'on - off':<10}" + "".join(f"{on[k] - off[k]:>+10.3f}" for k in SHOWN))
        covered = reports[True].judged
        print(f"{'':<6}({covered} covered questions; answered share with headings on "
              f"{reports[True].answered_share:.1%}, off {reports[False].answered_share:.1%})")
