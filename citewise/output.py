"""The stable JSON shape of an answer or a refusal (``ask --json``, the HTTP API, the log).

    {"status": "answered" | "refused",
     "question": str,                      # as asked
     "standalone_question": str,           # as retrieval and the gate read it: a follow-up
                                           # made standalone from the conversation
     "answer": str | null,                 # sentences with [n] markers; null when refused
     "citations": [{"n", "doc_id", "title", "section", "chunk_id", "quote"}],
                                           # title: the document's, to show a reader (else
                                           # its file name's stem; doc_id when it has none)
     "reason": str | null,                 # why it refused; null when answered
     "path": "answered" | "gate" | "citation_check" | "generation_failed",
     "related": [str],                     # section headings found, when refused
     "chunks": [{"doc_id", "section", "chunk_id", "cosine", "bm25", "rrf", "fused", "text"}],
     "gate": {"policy", "signal", "threshold",
              "parts": [{"question", "answer", "signal"}]},  # each part of a question with
                                           # several, decided alone; [] for one part
     "uncovered": [str],                   # the parts the sources do not cover (answer or
                                           # refusal of a question with several parts)
     "dropped": [{"sentence", "reason"}],  # sentences the citation check removed, and why
                                           # (also when it refused: then no sentence held)
     "citation_precision": float | null,   # supported / cited sentences of the draft; null when refused
     "warnings": [str],
     "timings": {stage: milliseconds},
     "query_id": int | null,               # the query log row; null if not logged, and
                                           # always null over HTTP (it counts every tenant's)
     "feedback_token": str | null}         # random: send it back with feedback on this answer

``chunks`` is the context when answered and the top-5 by cosine when refused; a chunk's
``fused`` is its score under the knowledge base's fusion (convex by default, or RRF), and
``rrf`` the same value under its first name. Keys are only ever added, never renamed or
removed, within a major version.
"""

from __future__ import annotations

from typing import Any

from citewise.records import Answer, Candidate, Refusal


def chunk_dict(c: Candidate) -> dict[str, Any]:
    return {
        "doc_id": c.chunk.doc_id,
        "section": c.chunk.heading,
        "chunk_id": c.chunk.id,
        "cosine": round(c.cosine, 4),
        "bm25": round(c.bm25, 4),
        "rrf": round(c.fused, 6),  # the first name of "fused", kept as its alias
        "fused": round(c.fused, 6),
        "text": c.chunk.text,
    }


def to_dict(result: Answer | Refusal) -> dict[str, Any]:
    return {
        "status": result.status,
        "question": result.question,
        "standalone_question": result.standalone or result.question,
        "answer": result.text if isinstance(result, Answer) else None,
        "citations": [
            {"n": c.n, "doc_id": c.doc_id, "title": c.title or c.doc_id, "section": c.section,
             "chunk_id": c.chunk_id, "quote": c.quote}
            for c in (result.citations if isinstance(result, Answer) else ())
        ],
        "reason": result.reason if isinstance(result, Refusal) else None,
        "path": "answered" if isinstance(result, Answer) else result.path,
        "related": list(result.related) if isinstance(result, Refusal) else [],
        "chunks": [chunk_dict(c) for c in result.chunks],
        "gate": {
            "policy": result.decision.policy,
            "signal": round(result.decision.signal, 4),
            "threshold": round(result.decision.threshold, 4),
            "parts": [{"question": p.question, "answer": p.decision.answer,
                       "signal": round(p.decision.signal, 4)} for p in result.parts],
        },
        "uncovered": list(result.uncovered),
        "dropped": [{"sentence": d.sentence, "reason": d.reason} for d in result.dropped],
        "citation_precision": (round(result.citation_precision, 4) if isinstance(result, Answer)
                               else None),
        "warnings": list(result.warnings),
        "timings": {k: round(v, 2) for k, v in result.timings.items()},
        "query_id": result.query_id,
        "feedback_token": result.feedback_token,
    }
