"""The local model's execution paths judged by retrieval and answers, not by cosine alone.

    python -m benchmarks.embed_paths [--data ../shared/data/scifact] [--paths a,b] [--docs N]

For each execution path this host offers (``citewise/embedders/runtimes.py``: ONNX Runtime in
float32, the reference; OpenVINO in float32; OpenVINO in bfloat16 where the CPU has it), the
SciFact knowledge base (all 5,183 abstracts, default settings) and the sample collection are
built with their vectors made on that path and its claims and questions embedded on the same
path, as a knowledge base records and uses it. Printed per path: word pieces a second
(``runtimes.trial``: best of three runs of 32 rows of 128 pieces), the worst cosine of the probe
sentences to sentence-transformers' vectors and of a text alone to itself in a padded batch,
SciFact hybrid nDCG@10 and recall@5 on the train and test claims, the sample's hybrid recall@5
and what ``ask`` returned (covered questions answered, out-of-scope ones refused).

The bound a reduced precision must meet to be a candidate (issue #32): SciFact hybrid nDCG@10
within 0.003 of the reference, recall@5 on the sample's test questions not lower, and a text's
vector the same alone and in a batch (cosine >= 0.9999). The last column says whether it does.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from benchmarks.benchcache import conditions, host, shared_data
from benchmarks.repeated_text import QUERIES, SHIPPED, SPLITS, covered_answered, measure, pair, rate
from benchmarks.scifact import load as load_claims
from citewise.calibrate.querysets import load_queries
from citewise.embedders import DEFAULT_EMBEDDER, get_embedder, runtimes

NDCG_MOVE = 0.003


def speed(path: str) -> runtimes.Trial:
    """The path's word pieces a second and worst cosines, as path selection measures them."""
    return get_embedder(DEFAULT_EMBEDDER, path).trial()  # type: ignore[attr-defined]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, help="SciFact folder (default: shared/data/scifact)")
    ap.add_argument("--paths", help="comma-separated execution paths [default: every one this "
                    f"host offers, of {', '.join(runtimes.PATHS)}]")
    ap.add_argument("--docs", type=int, help="only the first N abstracts (a quick check)")
    args = ap.parse_args()
    paths = args.paths.split(",") if args.paths else list(runtimes.offered())
    for path in paths:
        if (why := runtimes.unavailable(path)) is not None:
            ap.error(why)
    data = args.data or shared_data("scifact")
    print(host(), f"OpenVINO's CPU capabilities: {' '.join(sorted(runtimes.capabilities())) or '-'}",
          sep="\n", flush=True)
    print(f"started {time.strftime('%Y-%m-%d %H:%M')}; {conditions()}", flush=True)
    claims = {s: load_claims(data, s) for s in SPLITS}
    questions = {s: load_queries(QUERIES / f"smoking-cessation.{s}.jsonl") for s in SPLITS}
    rows = []
    for path in paths:
        print(f"{path} ({time.strftime('%H:%M')})", flush=True)
        trial = speed(path)
        model = get_embedder(DEFAULT_EMBEDDER, path)
        vectors = {s: model.embed([q.query for q in claims[s]]) for s in SPLITS}
        rows.append((trial, measure(SHIPPED, data / "corpus.jsonl", args.docs, claims, vectors,
                                    questions, embed_path=path)))
    print()
    reference = rows[0][1]
    print(f"{'path':<18}{'pieces/s':>9}{'probe cos':>10}{'alone/batch':>12}"
          f"{'SciFact nDCG@10':>18}{'R@5':>16}{'sample R@5':>16}{'answered':>16}{'refused':>16}"
          f"   within the bound")
    print(f"{'':<18}{'':>9}{'':>10}{'':>12}{'train | test':>18}{'train | test':>16}"
          f"{'train | test':>16}{'train | test':>16}{'train | test':>16}   (vs {paths[0]})")
    for trial, m in rows:
        tr, te = m.scifact["train"], m.scifact["test"]
        st, ss = m.sample["train"], m.sample["test"]
        moved = abs(te["ndcg@10"] - reference.scifact["test"]["ndcg@10"])
        held = ss.means["hybrid"]["recall@5"] >= reference.sample["test"].means["hybrid"]["recall@5"] - 1e-12
        ok = moved <= NDCG_MOVE and held and trial.same_text >= runtimes.SAME_TEXT
        print(f"{trial.path:<18}{trial.pieces_per_s:>9,.0f}{trial.probe_cosine:>10.5f}"
              f"{trial.same_text:>12.6f}  {pair(tr['ndcg@10'], te['ndcg@10'], '.4f', 7)}"
              f" {pair(tr['recall@5'], te['recall@5'], '.4f', 6)}"
              f"  {pair(st.means['hybrid']['recall@5'], ss.means['hybrid']['recall@5'])}"
              f"  {pair(covered_answered(st), covered_answered(ss))}"
              f"  {pair(rate(st, 'out_of_scope'), rate(ss, 'out_of_scope'))}"
              f"   {'yes' if ok else 'no'} (nDCG@10 test moved {moved:.4f})")
    print(f"\n{host()}\nfinished {time.strftime('%Y-%m-%d %H:%M')}; {conditions()}")


if __name__ == "__main__":
    main()
