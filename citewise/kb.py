"""A knowledge base and the settings it keeps: embedder, chunker, retrieval and gate.

The gate's threshold is stored with the embedder and the retrieval settings it was set for
(``gate_fingerprint``); when either changes, the gate is reported as uncalibrated.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from citewise.errors import ConfigError, UnknownNameError

FUSIONS = ("rrf", "convex")
KEYWORD_FIELDS = ("keyword_min_chunks", "keyword_rare_share", "keyword_drop_share")
LATER_FIELDS = (*KEYWORD_FIELDS, "rerank")  # at their defaults, not part of the fingerprint
MAX_RERANK = 50
MAX_NAME = 64
NAME_PATTERN = re.compile(rf"^[A-Za-z0-9][A-Za-z0-9_.-]{{0,{MAX_NAME - 1}}}$")


@dataclass(frozen=True)
class Retrieval:
    """How a question becomes a context: dense top-k and BM25 top-k fused, then MMR.

    ``fusion`` is ``rrf`` (reciprocal rank fusion, each side weighted) or ``convex`` (a weighted
    sum of min-max normalised cosine and BM25 scores); ``dense_weight`` is the dense side's
    weight in either (0.5: equal). The default, convex at 0.5, scored best of an 11-setting grid
    on the 809 SciFact *train* claims (nDCG@10 0.735 against 0.719 for plain RRF k=60);
    ``python -m benchmarks.scifact`` prints the grid and the test scores.

    Keyword search on a knowledge base of at least ``keyword_min_chunks`` chunks (0: any size)
    looks up how many of its chunks hold each question term (counts of this knowledge base
    alone, never of the whole store): a term in more than ``keyword_drop_share`` of them is
    left out, and a term in more than ``keyword_rare_share`` still adds to the BM25 score
    but no longer brings in candidates of its own: only chunks holding a rarer term are
    ranked (``citewise/search/keywords.py``). Ranking every chunk that holds any common word is
    what makes BM25 slow on large knowledge bases. Chosen on the SciFact train claims
    (``python -m benchmarks.keyword_pruning``); smaller knowledge bases are searched as before.

    ``rerank`` (0: off, at most ``MAX_RERANK``): the fused top ``rerank`` are reordered by the
    reader (``reading.relevance``) before the context is chosen; it needs the reader.
    ``python -m benchmarks.rerank`` measures what it costs and gives on SciFact.
    """

    dense_k: int = 50
    bm25_k: int = 50
    rrf_k: int = 60
    context_k: int = 8
    mmr: bool = True
    mmr_lambda: float = 0.7
    fusion: str = "convex"
    dense_weight: float = 0.5
    keyword_min_chunks: int = 20_000
    keyword_rare_share: float = 0.05
    keyword_drop_share: float = 0.3
    rerank: int = 0

    def validate(self) -> Retrieval:
        for name in ("dense_k", "bm25_k", "rrf_k", "context_k"):
            if getattr(self, name) < 1:
                raise ConfigError(f"retrieval setting {name} must be at least 1")
        if not 0 <= self.rerank <= MAX_RERANK:
            raise ConfigError(f"retrieval setting rerank lies in [0, {MAX_RERANK}], not {self.rerank}")
        if self.keyword_min_chunks < 0:
            raise ConfigError("retrieval setting keyword_min_chunks must be 0 or more")
        if not 0.0 < self.keyword_rare_share <= self.keyword_drop_share <= 1.0:
            raise ConfigError("retrieval settings must satisfy 0 < keyword_rare_share <= "
                              "keyword_drop_share <= 1")
        for name in ("mmr_lambda", "dense_weight"):
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise ConfigError(f"retrieval setting {name} must be between 0 and 1")
        if self.fusion not in FUSIONS:
            raise UnknownNameError("fusion", self.fusion, list(FUSIONS))
        return self


@dataclass(frozen=True)
class GateSetting:
    """The refusal policy and threshold, and what it was measured with."""

    policy: str
    threshold: float
    embedder: str
    fingerprint: str
    source: str = "default"  # "default" (shipped measurement) or "calibrated"
    details: dict[str, Any] = field(default_factory=dict, hash=False, compare=False)


@dataclass(frozen=True)
class LogPolicy:
    """What the query log keeps for this knowledge base (see ``citewise/telemetry/log.py``).

    ``retention_days``: entries older than this are deleted as new ones are written (None
    keeps them). ``hash_questions``: store an HMAC-SHA256 of the question instead of its text.
    ``keep_embeddings``: store the query vector (needed to replay without the question text;
    a vector can leak what was asked). ``salt``: the HMAC key when ``CITEWISE_LOG_SALT`` is unset.
    """

    retention_days: int | None = None
    hash_questions: bool = False
    keep_embeddings: bool = True
    salt: str = ""


@dataclass(frozen=True)
class KBConfig:
    embedder: str
    dim: int
    chunker: str = "sections"
    embed_headings: bool = True
    generator: str = "extractive"
    retrieval: Retrieval = Retrieval()
    gate: GateSetting | None = None
    log: LogPolicy = LogPolicy()
    # "auto": citewise's reader with the local MiniLM embedder, none with the others
    reader: str = "auto"
    # the local model's execution path the vectors were made on (embedders/runtimes.py), set at
    # the first ingest; "" before it, and for embedders that have one way to run
    embed_path: str = ""

    def fingerprint(self) -> str:
        """What a threshold depends on: the embedder, how the context is chosen and, when
        chosen by hand, the reader."""
        return _fingerprint(self.embedder, self.retrieval, self.embed_headings, self.reader)

    @property
    def reads(self) -> str:
        """The reader questions are read with: ``citewise-reader`` or ``none``."""
        if self.reader != "auto":
            return self.reader
        return "citewise-reader" if self.embedder == "local:all-MiniLM-L6-v2" else "none"

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> KBConfig:
        raw = json.loads(text)
        raw["retrieval"] = Retrieval(**raw.get("retrieval", {}))
        if raw.get("gate"):
            raw["gate"] = GateSetting(**raw["gate"])
        raw["log"] = LogPolicy(**raw.get("log", {}))
        return cls(**raw)


@lru_cache(maxsize=256)
def _fingerprint(embedder: str, retrieval: Retrieval, embed_headings: bool, reader: str) -> str:
    """``KBConfig.fingerprint``, remembered: the gate compares it on every question."""
    fields = dataclasses.asdict(retrieval)
    for name in LATER_FIELDS:  # added later: at their defaults, old thresholds stay valid
        if fields[name] == getattr(Retrieval, name):
            del fields[name]
    # a reader chosen by hand is part of it; "auto" is not, so older thresholds stay valid
    key = json.dumps([embedder, fields, embed_headings, *([reader] if reader != "auto" else [])])
    return hashlib.sha256(key.encode()).hexdigest()[:16]


@dataclass(frozen=True)
class KnowledgeBase:
    """A stored knowledge base. ``tenant_id`` is 0 for the operator's own (the CLI's), else
    the HTTP tenant whose it is: names are unique per tenant, and ``name`` is the tenant's."""

    id: int
    name: str
    config: KBConfig
    created_at: str = ""
    tenant_id: int = 0


def valid_name(name: str) -> bool:
    """A name ``check_name`` accepts (whole string: no trailing newline, no NUL)."""
    return isinstance(name, str) and NAME_PATTERN.fullmatch(name) is not None


def check_name(name: str, longest: int = MAX_NAME) -> str:
    """``name`` if it is a knowledge base's name of at most ``longest`` characters (the
    operator's: 64; a tenant's: ``tenancy.MAX_KB_NAME``)."""
    if not valid_name(name) or len(name) > longest:
        raise ConfigError(
            f"Invalid knowledge base name {name!r}: use 1-{longest} letters, digits, '_', '-' or "
            "'.', starting with a letter or digit"
        )
    return name
