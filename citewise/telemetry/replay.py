"""Replay logged questions against a new embedding model, then optionally switch over.

    replay(store, kb, "hashing:256") -> ReplayReport
    switch_over(store, kb, report)   -> the knowledge base, now on the new embedder

The shadow index is the knowledge base's stored chunks re-embedded with the new model (the
chunk texts, keyword index and chunk keys do not depend on the embedder, so only the vectors
change). Its vectors go to the store's shadow table; the live vectors and configuration are
not touched until ``switch_over`` copies the shadow over them and writes the new
configuration in one transaction.

For each logged question (or a seeded sample of them) both sides run the same retrieval
(dense + BM25, RRF, MMR) and the gate; the generator is not called. The report gives
overlap@5 of the retrieved documents (distinct documents among the fused candidates, best
first: ``|old top-5 ∩ new top-5| / max(sizes)``), the gate decisions that flip under the old
threshold (and under the new one), and, with a labelled query set or feedback, recall@5 and
refusal rates old against new.

When the new embedder is the knowledge base's own, the stored query embeddings are used as
they are and nothing is re-embedded. Questions stored hashed can only be replayed that way
(dense side only, their text being unknown); with another embedder they are skipped.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from citewise.answer import gate
from citewise.calibrate.querysets import LabelledQuery
from citewise.embedders import Embedder, embedder_of, get_embedder
from citewise.engine import Engine
from citewise.errors import QueryLogError
from citewise.kb import GateSetting, KBConfig, KnowledgeBase
from citewise.stores.base import DenseIndex, LogEntry
from citewise.stores.roles import Knowledge

TOP_DOCS = 5
EMBED_BATCH = 128


@dataclass(frozen=True)
class Outcome:
    """One question on one side: its top documents and the gate's decisions."""

    docs: tuple[str, ...]
    signal: float
    answer_old_threshold: bool
    answer_new_threshold: bool


@dataclass(frozen=True)
class Replayed:
    log_id: int
    question: str | None  # None when stored hashed
    old: Outcome
    new: Outcome

    @property
    def overlap(self) -> float:
        a, b = set(self.old.docs), set(self.new.docs)
        return len(a & b) / max(len(a), len(b), 1)


@dataclass(frozen=True)
class ReplayReport:
    kb: str
    old_embedder: str
    new_embedder: str
    same_embedder: bool
    old_gate: GateSetting
    new_gate: GateSetting
    new_gate_note: str
    chunks_embedded: int
    questions_embedded: int
    skipped: int
    questions: tuple[Replayed, ...] = field(hash=False)
    labelled: dict[str, Any] | None = field(default=None, hash=False)
    feedback: dict[str, Any] | None = field(default=None, hash=False)

    @property
    def overlap_at_5(self) -> float | None:
        return float(np.mean([q.overlap for q in self.questions])) if self.questions else None

    def flips(self, threshold: str = "old") -> dict[str, list[int]]:
        new = (lambda q: q.new.answer_old_threshold) if threshold == "old" \
            else (lambda q: q.new.answer_new_threshold)
        return {
            "answer_to_refusal": [q.log_id for q in self.questions
                                  if q.old.answer_old_threshold and not new(q)],
            "refusal_to_answer": [q.log_id for q in self.questions
                                  if not q.old.answer_old_threshold and new(q)],
        }

    def to_dict(self) -> dict[str, Any]:
        def setting(g: GateSetting) -> dict[str, Any]:
            return {"policy": g.policy, "threshold": round(g.threshold, 4), "source": g.source}

        return {
            "kb": self.kb, "old_embedder": self.old_embedder, "new_embedder": self.new_embedder,
            "same_embedder": self.same_embedder, "questions": len(self.questions),
            "skipped": self.skipped, "chunks_embedded": self.chunks_embedded,
            "questions_embedded": self.questions_embedded,
            "overlap_at_5": None if self.overlap_at_5 is None else round(self.overlap_at_5, 4),
            "old_gate": setting(self.old_gate), "new_gate": setting(self.new_gate),
            "new_gate_note": self.new_gate_note,
            "flips_old_threshold": self.flips("old"), "flips_new_threshold": self.flips("new"),
            "gate_pass_share": {"old": _share([q.old.answer_old_threshold for q in self.questions]),
                               "new_old_threshold": _share([q.new.answer_old_threshold
                                                            for q in self.questions]),
                               "new_new_threshold": _share([q.new.answer_new_threshold
                                                            for q in self.questions])},
            "labelled": self.labelled, "feedback": self.feedback,
            "details": [{"id": q.log_id, "question": q.question, "overlap": round(q.overlap, 4),
                         "old": {"docs": list(q.old.docs), "signal": round(q.old.signal, 4),
                                 "answer": q.old.answer_old_threshold},
                         "new": {"docs": list(q.new.docs), "signal": round(q.new.signal, 4),
                                 "answer_old_threshold": q.new.answer_old_threshold,
                                 "answer_new_threshold": q.new.answer_new_threshold}}
                        for q in self.questions],
        }


def _share(flags: Sequence[bool]) -> float | None:
    return round(sum(flags) / len(flags), 4) if flags else None


class _ShadowStore:
    """The live store with the dense side swapped for the shadow index (reads only)."""

    def __init__(self, store: Knowledge, index: DenseIndex) -> None:
        self._store, self._index = store, index

    def dense_index(self, kb: KnowledgeBase) -> DenseIndex:
        return self._index

    def dense_search(self, kb: KnowledgeBase, query: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        return self._index.search(query, k)

    def vectors(self, kb: KnowledgeBase, keys: list[int]) -> np.ndarray:
        return self._index.take(keys, kb.name)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)


def build_shadow(store: Knowledge, kb: KnowledgeBase, model: Embedder,
                 progress: Callable[[int], None] | None = None) -> tuple[DenseIndex, int]:
    """Re-embed every stored chunk with ``model`` into the shadow table; the shadow index."""
    keys = [int(k) for k in store.dense_index(kb).keys]
    for at in range(0, len(keys), EMBED_BATCH):
        batch = keys[at : at + EMBED_BATCH]
        chunks = store.chunks(kb, batch)
        texts = [chunks[k].embed_text if kb.config.embed_headings else chunks[k].text for k in batch]
        store.put_shadow_vectors(kb, model.name, batch, [chunks[k].id for k in batch],
                                 model.embed(texts))
        if progress:
            progress(len(batch))
    return store.shadow_index(kb, model.name, model.dim), len(keys)


def recalibrated(config: KBConfig) -> tuple[GateSetting, str]:
    """The gate the knowledge base gets on the new embedder, and how it was chosen."""
    setting = gate.default_setting(config, config.gate.policy if config.gate else gate.FALLBACK_POLICY)
    if setting.source == "default":
        note = (f"shipped default for {config.embedder} (measured on the sample collection's "
                "train questions); run `citewise calibrate` on this knowledge base's own labels")
    else:
        note = (f"no measured threshold exists for {config.embedder}: 0.5 until "
                "`citewise calibrate` sets one from labelled questions")
    return setting, note


def _outcome(store: Any, kb: KnowledgeBase, qvec: np.ndarray, text: str,
             old: gate.ThresholdGate, new: gate.ThresholdGate) -> Outcome:
    decided = Engine(store).decide(kb, text, qvec, the_gate=old, answerable=new.reads)
    docs = tuple(dict.fromkeys(c.chunk.doc_id for c in decided.retrieved.candidates))[:TOP_DOCS]
    d_old, d_new = decided.decision, new.decide(decided.signals)
    return Outcome(docs, d_old.signal, d_old.answer, d_new.answer)


def _recall(relevant: set[str], docs: Sequence[str]) -> float:
    return len(relevant & set(docs)) / len(relevant)


def replay(store: Knowledge, kb: KnowledgeBase, embedder: str, since: str | None = None,
           sample: int | None = None, labelled: Sequence[LabelledQuery] | None = None,
           seed: int = 0, progress: Callable[[int], None] | None = None) -> ReplayReport:
    """Replay the knowledge base's logged questions on ``embedder`` (module docstring)."""
    model = get_embedder(embedder)
    same = model.name == kb.config.embedder
    entries: list[LogEntry] = store.query_log(kb, since=since, embeddings=True)
    if sample is not None and sample < len(entries):
        picked = set(random.Random(seed).sample(range(len(entries)), sample))
        entries = [e for i, e in enumerate(entries) if i in picked]
    old_setting = kb.config.gate or gate.default_setting(kb.config)
    old_gate, _ = gate.gate_for(kb.config)
    new_config = replace(kb.config, embedder=model.name, dim=model.dim, gate=None)
    if same:
        new_setting, note = old_setting, "same embedder: the gate is unchanged"
        shadow_store: Any = store
        shadow_kb, chunks_embedded = kb, 0
    else:
        new_setting, note = recalibrated(new_config)
        index, chunks_embedded = build_shadow(store, kb, model, progress)
        shadow_store = _ShadowStore(store, index)
        shadow_kb = replace(kb, config=new_config)
    new_gate = gate.ThresholdGate(new_setting.policy, new_setting.threshold,
                                  model=new_setting.details.get("model"))
    old_as_new = gate.ThresholdGate(old_gate.policy, old_gate.threshold, model=old_gate.model)

    def own(e: LogEntry) -> np.ndarray | None:
        """The entry's own query vector, when it can stand for the old side."""
        return e.embedding if e.embedder == kb.config.embedder else None

    usable: list[tuple[LogEntry, str | None]] = []
    skipped = 0
    for e in entries:
        text = e.record.get("question")
        if (same and own(e) is not None) or text:
            usable.append((e, text))
        else:
            skipped += 1
    need_old = [text or "" for e, text in usable if own(e) is None]
    old_fresh = iter(embedder_of(kb).embed(need_old) if need_old else [])
    old_vecs = [v if (v := own(e)) is not None else next(old_fresh) for e, _ in usable]
    new_vecs = old_vecs if same else list(model.embed([text or "" for _, text in usable])
                                          if usable else [])
    embedded = len(need_old) + (0 if same else len(usable))
    results: list[Replayed] = []
    for (e, text), old_vec, new_vec in zip(usable, old_vecs, new_vecs, strict=True):
        old = _outcome(store, kb, old_vec, text or "", old_gate, old_gate)
        new = _outcome(shadow_store, shadow_kb, new_vec, text or "", old_as_new, new_gate)
        results.append(Replayed(e.id, text, old, new))

    labelled_report = None
    if labelled:
        labelled_report = _labelled(store, kb, shadow_store, shadow_kb, model, labelled,
                                    old_gate, new_gate)
    return ReplayReport(kb.name, kb.config.embedder, model.name, same, old_setting, new_setting,
                        note, chunks_embedded, embedded, skipped, tuple(results),
                        labelled_report, _feedback(entries, results))


def _side_figures(outcomes: list[tuple[LabelledQuery, Outcome]], new_threshold: bool) -> dict[str, Any]:
    with_sources = [(q, o) for q, o in outcomes if q.relevant]
    recall = [_recall(set(q.relevant), o.docs) for q, o in with_sources]
    answered = [o.answer_new_threshold if new_threshold else o.answer_old_threshold
                for _, o in outcomes]
    by_bucket: dict[str, list[bool]] = {}
    for (q, _), a in zip(outcomes, answered, strict=True):
        by_bucket.setdefault(q.bucket or q.expect or "all", []).append(not a)
    return {"recall_at_5": round(float(np.mean(recall)), 4) if recall else None,
            "refusal_rate": _share([not a for a in answered]),
            "refusal_rate_by_bucket": {b: _share(v) for b, v in sorted(by_bucket.items())}}


def _labelled(store: Knowledge, kb: KnowledgeBase, shadow_store: Any, shadow_kb: KnowledgeBase,
              model: Embedder, queries: Sequence[LabelledQuery], old_gate: gate.ThresholdGate,
              new_gate: gate.ThresholdGate) -> dict[str, Any]:
    texts = [q.query for q in queries]
    old_vecs = embedder_of(kb).embed(texts)
    new_vecs = old_vecs if model.name == kb.config.embedder else model.embed(texts)
    old = [(q, _outcome(store, kb, v, q.query, old_gate, old_gate))
           for q, v in zip(queries, old_vecs, strict=True)]
    new = [(q, _outcome(shadow_store, shadow_kb, v, q.query, old_gate, new_gate))
           for q, v in zip(queries, new_vecs, strict=True)]
    return {"queries": len(queries), "old": _side_figures(old, False),
            "new_old_threshold": _side_figures(new, False),
            "new_new_threshold": _side_figures(new, True)}


def _feedback(entries: Sequence[LogEntry], results: Sequence[Replayed]) -> dict[str, Any] | None:
    """Old against new on the questions people rated: a helpful answer's cited documents
    count as its relevant ones (recall@5); refusal rates among helpful and unhelpful ones; and
    how often a side repeats the gate decision that was rated helpful (answer or refusal)."""
    rated = {e.id: e for e in entries if e.feedback is not None}
    pairs = [(rated[r.log_id], r) for r in results if r.log_id in rated]
    if not pairs:
        return None
    out: dict[str, Any] = {"rated": len(pairs), "helpful": sum(bool(e.feedback) for e, _ in pairs)}
    for side in ("old", "new"):
        recall: list[float] = []
        helpful_refused: list[bool] = []
        unhelpful_refused: list[bool] = []
        kept: list[bool] = []
        for e, r in pairs:
            o = r.old if side == "old" else r.new
            (helpful_refused if e.feedback else unhelpful_refused).append(not o.answer_old_threshold)
            if e.feedback and "answer" in e.record.get("gate", {}):
                kept.append(o.answer_old_threshold == e.record["gate"]["answer"])
            cited = {c["doc_id"] for c in e.record.get("citations", [])}
            if e.feedback and cited:
                recall.append(_recall(cited, o.docs))
        out[side] = {"recall_at_5_cited": round(float(np.mean(recall)), 4) if recall else None,
                     "refusal_rate_helpful": _share(helpful_refused),
                     "refusal_rate_unhelpful": _share(unhelpful_refused),
                     "helpful_decision_kept": _share(kept)}
    return out


def switch_over(store: Knowledge, kb: KnowledgeBase, report: ReplayReport) -> KnowledgeBase:
    """Move the knowledge base onto the replayed embedder in one transaction: every live vector
    replaced by its shadow and the configuration (embedder, dimension, gate) written together."""
    if report.same_embedder:
        raise QueryLogError(f"Knowledge base {kb.name!r} already uses {report.new_embedder}")
    model = get_embedder(report.new_embedder)
    gate_setting = report.new_gate if report.new_gate.source == "calibrated" else None
    config = replace(kb.config, embedder=model.name, dim=model.dim, gate=gate_setting)
    return store.switch_vectors(kb, config)
