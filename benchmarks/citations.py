"""Measure the citation check on SciFact's labelled claims.

    python -m benchmarks.citations [--embedder local:all-MiniLM-L6-v2]
    python -m benchmarks.citations --reader

``--reader`` prints the check without the reader (the baseline), the shipped check with it
(the same, and a veto where the reader reads a contradiction: ``reading.contradiction``), and
the reader alone as the check (not shipped). The reader was trained on 85% of SciFact's train
claims; its thresholds are chosen on the other 15% (``training.reader.data.held_out_claim``),
and the rows are test claims.

Each claim with a SUPPORT or CONTRADICT label for an abstract becomes a drafted sentence
citing that abstract ("<claim> [1].", the abstract's title and text as passage 1), and the
check must accept SUPPORT and reject CONTRADICT; claims whose cited abstract (qrels) gives
not enough information (NEI) must be rejected too. A second set of rows uses only the
labelled rationale sentences as the passage (NEI claims have none). The support weight and
threshold are chosen on *train* claims (ids in qrels/train.tsv, whole abstracts) to maximise
balanced accuracy: the mean of the SUPPORT acceptance rate and the rejection rate of the
others (CONTRADICT and NEI weighted equally). Every row printed is on *test* claims
(qrels/test.tsv). ``--cache FILE.npz`` keeps the vectors between runs.

``--units`` says how the passage's sentences (and the passage as a whole) are embedded:

    alone         each on its own, as before late chunking (m006)
    context       one forward pass over the passage; a sentence is the mean of its tokens'
                  states, the passage the pass's vector (shipped for embedders with token states)
    context-text  the same, the passage as the mean of its text's tokens
    context-body  the pass over the abstract without its title (the title line alone): the
                  passage not read after its heading

``--compare`` prints one row per method (test claims, the shipped weight and threshold, and
the train-tuned ones); otherwise every row below is printed for ``--units``. 2026-12-01,
local all-MiniLM-L6-v2, whole abstracts, weight 0.5 (balanced accuracy, test / train):

    alone         threshold 0.61  0.701 / 0.697   (shipped before late chunking)
    context       threshold 0.61  0.687 / 0.682;  tuned on train 0.59: 0.698 / 0.699 (shipped)
    context-text  threshold 0.59  0.698 / 0.699   (the same at the tuned threshold)
    context-body  threshold 0.60  0.693 / 0.697
    context, span means that count [CLS] and [SEP] too: tuned 0.25/0.56, 0.669 / 0.697

Rows:

    accept all     the baseline: every cited sentence passes
    lexical 0.6    the check without an embedder (content-word share >= 0.6, then consistency)
    score only     the support score at the tuned setting, no consistency checks
    full check     the support score at the tuned setting and the consistency checks (shipped)
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from benchmarks.benchcache import shared_data
from citewise.answer import sentence_vectors, support
from citewise.embedders import get_embedder
from citewise.records import Chunk
from citewise.sentences import split_sentences

ROOT = Path(__file__).resolve().parent.parent

UNITS = ("alone", "context", "context-text", "context-body")
PASS_BATCH = 64  # passages per forward-pass batch (their token states are held meanwhile)

WEIGHTS = (0.0, 0.25, 0.5, 0.75, 1.0)
THRESHOLDS = tuple(round(x, 2) for x in np.arange(0.0, 1.001, 0.01))


@dataclass
class Pair:
    claim: str
    passage: str
    label: str  # SUPPORT, CONTRADICT, or NEI (the abstract gives not enough information)
    split: str
    lexical: float = 0.0
    cosine: float = 0.0
    lexical_only_ok: bool = False
    consistent: bool = True
    reason: str = ""
    qid: str = ""
    answers: float = 0.0  # the reader's: the best unit's P(answers)
    contradicts: float = 0.0  # the highest P(contradicts)
    read_consistent: bool = True  # support.inconsistency with the reader's best unit


def load(rationale: bool, data: Path) -> tuple[list[Pair], int]:
    """Claim-abstract pairs with a label; also how many rationale indices fell outside the
    abstract's sentences as citewise splits them (those pairs use what was found)."""
    split_of, cited = {}, {}
    for name in ("train", "test"):
        for line in (data / "qrels" / f"{name}.tsv").read_text().splitlines()[1:]:
            if line.strip():
                qid, doc_id = line.split("\t")[:2]
                split_of[qid] = name
                cited.setdefault(qid, []).append(doc_id)
    corpus = {}
    for line in (data / "corpus.jsonl").open():
        d = json.loads(line)
        corpus[d["_id"]] = d
    pairs, misaligned = [], 0
    for line in (data / "queries.jsonl").open():
        q = json.loads(line)
        if not q.get("metadata") and not rationale and q["_id"] in cited:
            for doc_id in cited[q["_id"]]:
                doc = corpus[doc_id]
                pairs.append(Pair(q["text"], f"{doc['title']}\n\n{doc['text']}", "NEI", split_of[q["_id"]],
                                  qid=q["_id"]))
        for doc_id, evidence in (q.get("metadata") or {}).items():
            doc = corpus[doc_id]
            if rationale:
                sentences = split_sentences(doc["text"])
                wanted = sorted({i for e in evidence for i in e["sentences"]})
                misaligned += any(i >= len(sentences) for i in wanted)
                passage = " ".join(sentences[i] for i in wanted if i < len(sentences))
                if not passage:
                    continue
            else:
                passage = f"{doc['title']}\n\n{doc['text']}"
            pairs.append(Pair(q["text"], passage, evidence[0]["label"], split_of[q["_id"]], qid=q["_id"]))
    return pairs, misaligned


def embed_all(texts: list[str], embedder_spec: str, cache: Path | None) -> dict[str, np.ndarray]:
    """Vectors of ``texts``, reusing those kept in ``cache`` (an .npz) by an earlier run."""
    known: dict[str, np.ndarray] = {}
    if cache and cache.exists():
        with np.load(cache, allow_pickle=False) as z:
            if str(z["embedder"]) == embedder_spec:
                known = dict(zip(z["texts"].tolist(), z["vectors"], strict=True))
    todo = [t for t in dict.fromkeys(texts) if t not in known]
    if todo:
        print(f"embedding {len(todo):,} claims and passage sentences with {embedder_spec} ...",
              file=sys.stderr)
        known.update(zip(todo, get_embedder(embedder_spec).embed(todo, progress=sys.stderr.isatty()),
                         strict=True))
        if cache:
            np.savez(cache, embedder=embedder_spec, texts=np.array(list(known)),
                     vectors=np.stack(list(known.values())))
    return known


def in_context(passages: list[str], method: str, embedder_spec: str) -> dict[tuple[str, str], np.ndarray]:
    """(passage, unit) -> the unit's vector read in the passage, by ``method``."""
    model = get_embedder(embedder_spec)
    out: dict[tuple[str, str], np.ndarray] = {}
    todo = list(dict.fromkeys(passages))
    print(f"running {len(todo):,} passages through {embedder_spec} ({method}) ...", file=sys.stderr)
    for at in range(0, len(todo), PASS_BATCH):
        chunks, groups, alone = [], [], []
        for passage in todo[at : at + PASS_BATCH]:
            units = support.units(passage)
            title, sep, body = passage.partition("\n\n")
            if method == "context-body" and sep and body.strip():
                chunks.append(Chunk("p", 0, (), body))
                groups.append([u for u in units if u != title.strip()])
                alone.append(title.strip())
            else:
                chunks.append(Chunk("p", 0, (), passage))
                groups.append(units)
                alone.append("")
        whole = "text" if method == "context-text" else "chunk"
        vectors, said = sentence_vectors.embed_chunks(model, chunks, False, groups, whole=whole)
        titles = model.embed([t for t in alone if t]) if any(alone) else np.zeros((0, model.dim))
        more = iter(titles)
        batch = todo[at : at + PASS_BATCH]
        for i, (passage, group, s) in enumerate(zip(batch, groups, said or [], strict=True)):
            units = support.units(passage)
            out.update({(passage, u): v for u, v in zip(group, s.vectors, strict=True)})
            if alone[i]:
                out[passage, alone[i]] = next(more)
            if len(units) > 1 and (passage, units[-1]) not in out:  # the body's pass for the whole
                out[passage, units[-1]] = vectors[i]
    return out


def score_all(pairs: list[Pair], embedder_spec: str, cache: Path | None, method: str = "alone") -> None:
    if method == "alone":
        units = [u for p in pairs for u in support.units(p.passage)]
        vectors = embed_all([p.claim for p in pairs] + units, embedder_spec, cache)
        read = {(p.passage, u): vectors[u] for p in pairs for u in support.units(p.passage)}
    else:
        vectors = embed_all([p.claim for p in pairs], embedder_spec, cache)
        read = in_context([p.passage for p in pairs], method, embedder_spec)
    for p in pairs:
        units = np.stack([read[p.passage, u] for u in support.units(p.passage)])
        s = support.score(p.claim, p.passage, vectors[p.claim], units, threshold=-1.0)
        p.lexical, p.cosine, p.consistent, p.reason = s.lexical, float(s.cosine or 0.0), s.ok, s.reason
        p.lexical_only_ok = support.score(p.claim, p.passage).ok


def verdicts(pairs: list[Pair], weight: float, threshold: float, consistency: bool) -> np.ndarray:
    total = np.array([weight * p.lexical + (1 - weight) * p.cosine for p in pairs])
    ok = total >= threshold
    if consistency:
        ok &= np.array([p.consistent for p in pairs])
    return ok


def metrics(pairs: list[Pair], accepted: np.ndarray) -> dict[str, float]:
    """Precision and recall of "supported" over SUPPORT vs CONTRADICT pairs; NEI rejection apart."""
    label = np.array([p.label for p in pairs])
    sup, con, nei = label == "SUPPORT", label == "CONTRADICT", label == "NEI"
    tp, fn = int((accepted & sup).sum()), int((~accepted & sup).sum())
    fp, tn = int((accepted & con).sum()), int((~accepted & con).sum())
    precision = tp / (tp + fp) if tp + fp else 0.0
    recall = tp / (tp + fn) if tp + fn else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    reject = tn / (tn + fp) if tn + fp else 0.0
    nei_reject = float((~accepted & nei).sum() / nei.sum()) if nei.any() else float("nan")
    rejection = (reject + nei_reject) / 2 if nei.any() else reject
    return {"tp": tp, "fp": fp, "fn": fn, "tn": tn, "precision": precision, "recall": recall,
            "f1": f1, "reject": reject, "nei_n": int(nei.sum()), "nei_reject": nei_reject,
            "balanced": (recall + rejection) / 2}


def tune(pairs: list[Pair], consistency: bool) -> tuple[float, float, float]:
    best = (-1.0, 0.0, 0.0)
    for w in WEIGHTS:
        for t in THRESHOLDS:
            b = metrics(pairs, verdicts(pairs, w, t, consistency))["balanced"]
            if b > best[0] + 1e-12:
                best = (b, w, t)
    return best


def row(name: str, m: dict[str, float], setting: str) -> str:
    nei = f"{m['nei_reject']:>6.3f}" if m["nei_n"] else f"{'-':>6}"
    return (f"{name:<16} {m['tp']:>4} {m['fn']:>4} {m['fp']:>4} {m['tn']:>4} {m['precision']:>6.3f} "
            f"{m['recall']:>6.3f} {m['f1']:>6.3f} {m['reject']:>7.3f} {nei} {m['balanced']:>6.3f}  {setting}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--embedder", default="local:all-MiniLM-L6-v2")
    ap.add_argument("--data", type=Path, help="SciFact folder (default: shared/data/scifact)")
    ap.add_argument("--cache", type=Path, help="an .npz to keep vectors in between runs")
    ap.add_argument("--units", choices=UNITS, default="context",
                    help="how passage sentences are embedded (default: context, as shipped)")
    ap.add_argument("--compare", nargs="*", choices=UNITS, metavar="UNITS",
                    help="one row per method (default: all), test and train balanced accuracy")
    ap.add_argument("--reader", action="store_true",
                    help="the check with the reader beside the check without it (test claims)")
    args = ap.parse_args()
    args.data = args.data or shared_data("scifact")
    if args.reader:
        main_reader(args.data, args.embedder, args.cache)
        return
    if args.compare is not None:
        print_comparison(compare(args.compare or list(UNITS), args.data, args.embedder, args.cache))
        return
    header = (f"{'check':<12} {'TP':>4} {'FN':>4} {'FP':>4} {'TN':>4} {'prec':>6} {'recall':>6} "
              f"{'F1':>6} {'reject':>7} {'NEIrej':>6} {'bal':>6}  setting")
    print(f"SciFact claims as drafted sentences citing their abstract; embedder {args.embedder}.")
    print("'supported' is the positive class: TP = SUPPORT accepted, FN = SUPPORT rejected,")
    print("FP = CONTRADICT accepted, TN = CONTRADICT rejected; prec/recall/F1 of 'supported' over")
    print("SUPPORT and CONTRADICT; reject = CONTRADICT rejection rate; NEIrej = rejection rate of")
    print("claims whose cited abstract gives not enough information; bal = mean of the SUPPORT")
    print("acceptance rate and the rejection rate of the rest (CONTRADICT and NEI weighted")
    print("equally; CONTRADICT alone where NEI has no rationale). Weight and threshold chosen on")
    print("train claims (whole abstracts) to maximise bal; every row below is test claims.")
    print(f"Passage sentences embedded: {args.units}.\n")
    settings: dict[str, tuple[float, float]] = {}
    for rationale in (False, True):
        pairs, misaligned = load(rationale, args.data)
        score_all(pairs, args.embedder, args.cache, args.units)
        train = [p for p in pairs if p.split == "train"]
        test = [p for p in pairs if p.split == "test"]
        if not settings:
            settings["full"] = tune(train, consistency=True)[1:]
            settings["score"] = tune(train, consistency=False)[1:]
        kind = "rationale sentences only" if rationale else "whole abstract (title + text)"
        counts = Counter(p.label for p in test)
        note = f"; {misaligned} with a rationale index past citewise's sentence split" if rationale else ""
        print(f"passage = {kind}; test pairs: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items()))
              + f" (train {len(train)}){note}")
        print(header)
        print(row("accept all", metrics(test, np.ones(len(test), bool)), "-"))
        print(row("lexical 0.6", metrics(test, np.array([p.lexical_only_ok for p in test])),
                  "no embedder: content-word share >= 0.6 + consistency"))
        w, t = settings["score"]
        print(row("score only", metrics(test, verdicts(test, w, t, False)),
                  f"weight {w}, threshold {t}, no consistency checks"))
        w, t = settings["full"]
        full = verdicts(test, w, t, True)
        print(row("full check", metrics(test, full), f"weight {w}, threshold {t} + consistency (shipped)"))
        rejected = Counter((_kind(p.reason), p.label) for p, ok in zip(test, full, strict=True) if not ok)
        by_kind = Counter(k for (k, _), v in rejected.items() for _ in range(v))
        kinds = [k for k, _ in by_kind.most_common()]
        print("  full check rejections by cause (test): " + "; ".join(
            f"{k}: " + ", ".join(f"{lab} {rejected[k, lab]}" for lab in sorted(counts) if rejected[k, lab])
            for k in kinds))
        print()


def compare(methods: list[str], data: Path, embedder: str, cache: Path | None) -> list[dict]:
    """Per method and passage kind: test metrics of the full check at the shipped weight and
    threshold and at those tuned on train (whole abstracts), and train's balanced accuracy."""
    out = []
    for method in methods:
        tuned: tuple[float, float] | None = None
        for rationale in (False, True):
            pairs, _ = load(rationale, data)
            score_all(pairs, embedder, cache, method)
            train = [p for p in pairs if p.split == "train"]
            test = [p for p in pairs if p.split == "test"]
            tuned = tuned or tune(train, consistency=True)[1:]
            shipped = support.THRESHOLD if method == "alone" else support.CONTEXT_THRESHOLD
            for setting, (w, t) in (("shipped", (support.WEIGHT, shipped)), ("tuned", tuned)):
                out.append({"method": method, "passage": "rationale" if rationale else "abstract",
                            "setting": f"{setting} {w}/{t}",
                            "train_bal": metrics(train, verdicts(train, w, t, True))["balanced"],
                            **metrics(test, verdicts(test, w, t, True))})
    return out


def print_comparison(rows: list[dict]) -> None:
    print("SciFact test claims, full check (score + consistency); train_bal = train balanced accuracy")
    print(f"{'units':<13} {'passage':<10} {'setting':<17} {'prec':>6} {'recall':>6} {'F1':>6} "
          f"{'reject':>7} {'NEIrej':>6} {'bal':>6} {'train_bal':>9}")
    for r in rows:
        nei = f"{r['nei_reject']:>6.3f}" if r["nei_n"] else f"{'-':>6}"
        print(f"{r['method']:<13} {r['passage']:<10} {r['setting']:<17} {r['precision']:>6.3f} "
              f"{r['recall']:>6.3f} {r['f1']:>6.3f} {r['reject']:>7.3f} {nei} {r['balanced']:>6.3f} "
              f"{r['train_bal']:>9.3f}")


def score_reader(pairs: list[Pair]) -> None:
    """The reader's verdict inputs for each pair, read as ``citations.Checker`` reads them: each
    unit of the passage (the title is one)."""
    from citewise.reader import ANSWERS, CONTRADICTS, get_reader

    reader = get_reader("citewise-reader")
    assert reader is not None
    print(f"reading {len(pairs):,} claim-passage pairs ...", file=sys.stderr)
    for p in pairs:
        parts = support.units(p.passage)
        units = parts[:-1] if len(parts) > 1 else parts
        probs = reader.read([(p.claim, u) for u in units])
        p.answers, p.contradicts = float(probs[:, ANSWERS].max()), float(probs[:, CONTRADICTS].max())
        best = units[int(probs[:, ANSWERS].argmax())]
        p.read_consistent = not support.inconsistency(p.claim, p.passage, best)


def reader_verdicts(pairs: list[Pair], supported_at: float, contradicted_at: float,
                    consistency: bool) -> np.ndarray:
    """The reader alone as the check: supported unless contradicted (not shipped)."""
    answers = np.array([p.answers for p in pairs])
    contradicts = np.array([p.contradicts for p in pairs])
    ok = (answers >= supported_at) & ~((contradicts >= contradicted_at) & (contradicts > answers))
    if consistency:
        ok &= np.array([p.read_consistent for p in pairs])
    return ok


def vetoed(pairs: list[Pair], contradicted_at: float) -> np.ndarray:
    """The shipped check without the reader, and a veto where the reader reads a contradiction
    (P(contradicts) at ``contradicted_at`` or more, and above P(answers))."""
    answers = np.array([p.answers for p in pairs])
    contradicts = np.array([p.contradicts for p in pairs])
    return (verdicts(pairs, support.WEIGHT, support.CONTEXT_THRESHOLD, True)
            & ~((contradicts >= contradicted_at) & (contradicts > answers)))


READ_STEPS = tuple(round(x, 2) for x in np.arange(0.05, 0.951, 0.05))


def tune_reader(pairs: list[Pair], consistency: bool) -> tuple[float, float, float]:
    """The two thresholds that maximise balanced accuracy on ``pairs``."""
    best = (-1.0, 0.5, 0.5)
    for s in READ_STEPS:
        for c in READ_STEPS:
            b = metrics(pairs, reader_verdicts(pairs, s, c, consistency))["balanced"]
            if b > best[0] + 1e-12:
                best = (b, s, c)
    return best


def main_reader(data: Path, embedder: str, cache: Path | None) -> None:
    """The check with the reader beside the shipped check without it, on test claims."""
    from citewise.reader import reading
    from training.reader.data import held_out_claim

    header = (f"{'check':<16} {'TP':>4} {'FN':>4} {'FP':>4} {'TN':>4} {'prec':>6} {'recall':>6} "
              f"{'F1':>6} {'reject':>7} {'NEIrej':>6} {'bal':>6}  setting")
    print("SciFact claims as drafted sentences citing their abstract (columns as without --reader).")
    print("Reader thresholds chosen on the 15% of train claims the reader never saw; rows are test claims.\n")
    chosen: dict[str, tuple[float, float]] = {}
    for rationale in (False, True):
        pairs, _ = load(rationale, data)
        score_all(pairs, embedder, cache, "context")
        score_reader(pairs)
        held = [p for p in pairs if p.split == "train" and held_out_claim(p.qid)]
        test = [p for p in pairs if p.split == "test"]
        if not chosen:
            for name, consistency in (("reader", True), ("reader only", False)):
                chosen[name] = tune_reader(held, consistency)[1:]
            chosen["veto"] = (0.0, max(READ_STEPS, key=lambda c: metrics(held, vetoed(held, c))["balanced"]))
        kind = "rationale sentences only" if rationale else "whole abstract (title + text)"
        print(f"passage = {kind}; test pairs {len(test)}, held-out train pairs {len(held)}")
        print(header)
        shipped = verdicts(test, support.WEIGHT, support.CONTEXT_THRESHOLD, True)
        print(row("no reader", metrics(test, shipped),
                  f"weight {support.WEIGHT}, threshold {support.CONTEXT_THRESHOLD} + consistency "
                  "(the baseline)"))
        c = reading.CONTRADICTED_AT
        print(row("score + veto", metrics(test, vetoed(test, c)),
                  f"shipped: the check above, and rejected where the reader reads a contradiction >= {c}"))
        c = chosen["veto"][1]
        print(row("  (tuned)", metrics(test, vetoed(test, c)),
                  f"the veto's threshold as tuned on held-out train: {c}"))
        for name, consistency in (("reader", True), ("reader only", False)):
            s, c = chosen[name]
            print(row(f"{name} (tuned)", metrics(test, reader_verdicts(test, s, c, consistency)),
                      f"tuned on held-out train: supported >= {s}, contradicted >= {c}"
                      + (" + consistency" if consistency else "")))
        print()


def _kind(reason: str) -> str:
    if not reason:
        return "score"
    for key, name in (("number", "number"), ("units", "unit"), ("negates", "negation"),
                      ("says", "polarity"), ("instruction", "instruction")):
        if key in reason:
            return name
    return "other"


if __name__ == "__main__":
    main()
