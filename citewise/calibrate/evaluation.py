"""Evaluation: document-level retrieval metrics and gate refusal rates over a labelled query set.

Metrics are pure functions of a ranked list of document ids and the relevant documents with
their grades (``{doc id: grade}``, grade > 0 relevant), as BEIR and trec_eval compute them:

- ``recall@k``: share of the relevant documents found in the first ``k``;
- ``hit@k``: 1 if any relevant document is in the first ``k``;
- ``MRR@k``: 1 / rank of the first relevant document within ``k`` (0 if none);
- ``nDCG@k``: ``sum(grade / log2(rank + 1))`` over the first ``k``, divided by the same sum for
  the ideal order of all judged documents (linear gains, as trec_eval's ``ndcg_cut``).

Retrieval returns chunks; a document counts once, at the rank of its best chunk. For ``dense``,
``bm25`` and ``hybrid`` the ranking is the fused candidate list (up to dense_k + bm25_k chunks,
so well over 10 documents). For ``hybrid+mmr`` it is the MMR-chosen context (what a generator
would read) followed by the remaining candidates in fused order.

For queries with ``expect`` each question is also asked as ``ask`` asks it (gate, generator and
citation check: ``end_to_end.py``): the gate's decision in that run gives the gate-only rates,
and what ``ask`` returned the end-to-end ones. With ``answers=False`` only the gate decides, on
the same context, and no generator is called.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from citewise.answer import gate
from citewise.answer.questions import check_question
from citewise.calibrate import end_to_end
from citewise.calibrate.querysets import LabelledQuery
from citewise.calibrate.rates import Rate, refusal_rates
from citewise.embedders import embedder_of
from citewise.engine import Engine
from citewise.errors import ConfigError
from citewise.kb import KnowledgeBase, Retrieval
from citewise.records import Candidate
from citewise.search import retrieval

MODES = tuple(retrieval.MODES)
RECALL_AT = (1, 5, 10)
METRICS = ("recall@1", "recall@5", "recall@10", "hit@5", "mrr@10", "ndcg@10")
EMBED_BATCH = 64


# -- metrics: pure functions ----------------------------------------------------------------


def _relevant(relevant: dict[str, int]) -> set[str]:
    return {d for d, g in relevant.items() if g > 0}


def recall_at(ranked: Sequence[str], relevant: dict[str, int], k: int) -> float:
    wanted = _relevant(relevant)
    if not wanted:
        return 0.0
    return len(wanted.intersection(ranked[:k])) / len(wanted)


def hit_at(ranked: Sequence[str], relevant: dict[str, int], k: int) -> float:
    return 1.0 if _relevant(relevant).intersection(ranked[:k]) else 0.0


def mrr_at(ranked: Sequence[str], relevant: dict[str, int], k: int = 10) -> float:
    wanted = _relevant(relevant)
    for rank, doc in enumerate(ranked[:k], 1):
        if doc in wanted:
            return 1.0 / rank
    return 0.0


def ndcg_at(ranked: Sequence[str], relevant: dict[str, int], k: int = 10) -> float:
    dcg = sum(max(relevant.get(doc, 0), 0) / math.log2(rank + 1)
              for rank, doc in enumerate(ranked[:k], 1))
    ideal = sorted((g for g in relevant.values() if g > 0), reverse=True)[:k]
    idcg = sum(g / math.log2(rank + 1) for rank, g in enumerate(ideal, 1))
    return dcg / idcg if idcg else 0.0


def score(ranked: Sequence[str], relevant: dict[str, int]) -> dict[str, float]:
    """Every metric of ``METRICS`` for one ranked document list."""
    out = {f"recall@{k}": recall_at(ranked, relevant, k) for k in RECALL_AT}
    out["hit@5"] = hit_at(ranked, relevant, 5)
    out["mrr@10"] = mrr_at(ranked, relevant, 10)
    out["ndcg@10"] = ndcg_at(ranked, relevant, 10)
    return out


def documents(chunks: Iterable[Candidate]) -> list[str]:
    """Distinct document ids in order of their best (first) chunk."""
    return list(dict.fromkeys(c.chunk.doc_id for c in chunks))


def ranking(found: retrieval.Retrieved, mode: str) -> list[str]:
    """The ranked document list a mode is scored on (see the module docstring)."""
    if retrieval.get_mode(mode).mmr:  # the context MMR picked first, then the rest
        return documents([*found.context, *found.candidates])
    return documents(found.candidates)


# -- running a query set --------------------------------------------------------------------


@dataclass(frozen=True)
class QueryResult:
    id: str
    docs: dict[str, list[str]]  # mode -> ranked document ids (first 10)
    scores: dict[str, dict[str, float]]  # mode -> metric -> value (judged queries only)
    answered: bool | None = None  # the gate's decision, for queries with ``expect``
    signal: float | None = None
    retrieve_ms: dict[str, float] = field(default_factory=dict)
    outcome: end_to_end.Outcome | None = None  # where ``ask`` ended, when answers were asked


@dataclass(frozen=True)
class EvalReport:
    kb: str
    modes: tuple[str, ...]
    queries: int
    judged: int  # queries with at least one relevant document
    means: dict[str, dict[str, float]]  # mode -> metric -> mean over judged queries
    gate_policy: str
    gate_threshold: float
    gate_warnings: tuple[str, ...]
    buckets: tuple[Rate, ...]  # in BUCKETS order, with exact 95% intervals; empty without ``expect``
    labelled: int  # queries with ``expect``
    answered: int  # of those, how many the gate lets through
    end_to_end: end_to_end.EndToEnd | None = None  # what ``ask`` returned (None: gate only)
    results: tuple[QueryResult, ...] = field(repr=False, compare=False, default=())

    @property
    def answered_share(self) -> float:
        return self.answered / self.labelled if self.labelled else 0.0


def check_modes(modes: Sequence[str]) -> tuple[str, ...]:
    for m in modes:
        if m not in MODES:
            from citewise.errors import UnknownNameError

            raise UnknownNameError("retrieval mode", m, list(MODES))
    if not modes:
        raise ConfigError(f"Give at least one retrieval mode: {', '.join(MODES)}")
    return tuple(dict.fromkeys(modes))


def evaluate(
    engine: Engine,
    kb: KnowledgeBase,
    queries: Sequence[LabelledQuery],
    modes: Sequence[str] = MODES,
    settings: Retrieval | None = None,
    progress: Callable[[int], None] | None = None,
    vectors: np.ndarray | None = None,
    answers: bool = True,
) -> EvalReport:
    """Run every query through each mode, and those with ``expect`` through ``ask`` (or, with
    ``answers=False``, the gate alone).

    Query vectors are embedded in batches once and reused by every mode, or given as
    ``vectors`` (one row per query). ``settings`` overrides the knowledge base's retrieval
    settings (e.g. while tuning on a train split); ``ask`` uses the knowledge base's own, so
    the two cannot be combined for labelled queries.
    """
    modes = check_modes(modes)
    if answers and settings is not None and any(q.expect is not None for q in queries):
        raise ConfigError("Answers are asked with the knowledge base's own retrieval settings; "
                          "evaluate other settings with the gate alone (answers=False).")
    s = settings or kb.config.retrieval
    s = replace(s, context_k=max(s.context_k, 1)).validate()
    model = embedder_of(kb)
    the_gate, warnings = gate.gate_for(kb.config)
    texts = [check_question(q.query) for q in queries]
    results: list[QueryResult] = []
    for start in range(0, len(queries), EMBED_BATCH):
        batch = texts[start : start + EMBED_BATCH]
        qvecs = model.embed(batch) if vectors is None else vectors[start : start + len(batch)]
        for q, text, qvec in zip(queries[start:], batch, qvecs, strict=False):
            results.append(_one(engine, kb, q, text, qvec, modes, s, the_gate, answers))
            if progress:
                progress(1)
    report = summarise(kb.name, modes, results, queries, the_gate, warnings)
    outcomes = [r.outcome for r in results if r.outcome is not None]
    if not outcomes:
        return report
    return replace(report, end_to_end=end_to_end.summarise(outcomes, kb.config.generator))


def _one(engine: Engine, kb: KnowledgeBase, q: LabelledQuery, text: str, qvec: np.ndarray,
         modes: tuple[str, ...], s: Retrieval, the_gate: gate.ThresholdGate,
         answers: bool) -> QueryResult:
    docs: dict[str, list[str]] = {}
    scores: dict[str, dict[str, float]] = {}
    timings: dict[str, float] = {}
    for mode in modes:
        found = engine.retrieve(kb, text, mode, vector=qvec, settings=s)
        ranked = ranking(found, mode)
        docs[mode] = ranked[:10]
        timings[mode] = sum(found.timings.values())
        if _relevant(q.relevant):
            scores[mode] = score(ranked, q.relevant)
    answered = signal = outcome = None
    if q.expect is not None and answers:
        result = engine.ask(kb, text, log=False)
        outcome = end_to_end.outcome(q, _bucket(q), result)
        answered, signal = result.decision.answer, result.decision.signal
    elif q.expect is not None:
        decision = engine.decide(kb, text, qvec, s, the_gate).decision
        answered, signal = decision.answer, decision.signal
    return QueryResult(q.id, docs, scores, answered, signal, timings, outcome)


def _bucket(q: LabelledQuery) -> str:
    return q.bucket or "unbucketed"


def summarise(kb: str, modes: tuple[str, ...], results: Sequence[QueryResult],
              queries: Sequence[LabelledQuery], the_gate: gate.ThresholdGate,
              warnings: Sequence[str]) -> EvalReport:
    judged = [r for r in results if r.scores]
    means = {m: {k: statistics.fmean(r.scores[m][k] for r in judged) if judged else 0.0
                 for k in METRICS} for m in modes}
    labelled = [(q, r) for q, r in zip(queries, results, strict=True) if r.answered is not None]
    buckets = refusal_rates((_bucket(q), not r.answered) for q, r in labelled)
    return EvalReport(kb, modes, len(results), len(judged), means, the_gate.policy,
                      the_gate.threshold, tuple(warnings), buckets, len(labelled),
                      sum(bool(r.answered) for _, r in labelled), results=tuple(results))


def to_dict(report: EvalReport) -> dict[str, object]:
    """The stable ``eval --json`` shape (documented in docs/calibration.md)."""
    return {
        "kb": report.kb,
        "queries": report.queries,
        "judged": report.judged,
        "modes": {m: {k: round(v, 4) for k, v in report.means[m].items()} for m in report.modes},
        "gate": {
            "policy": report.gate_policy,
            "threshold": round(report.gate_threshold, 4),
            "warnings": list(report.gate_warnings),
            "labelled": report.labelled,
            "answered": report.answered,
            "answered_share": round(report.answered_share, 4),
            "buckets": {b.bucket: {"n": b.n, "refused": b.refused, "refusal_rate": round(b.rate, 4),
                                   "low": round(b.low, 4), "high": round(b.high, 4)}
                        for b in report.buckets},
        },
        "end_to_end": None if report.end_to_end is None else end_to_end.to_dict(report.end_to_end),
    }
