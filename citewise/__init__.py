"""citewise: answers questions from your documents with citations, or refuses and says why.

    import citewise

    engine = citewise.Engine(citewise.open_store("kb.db"))   # a path, or sqlite:// mysql:// postgresql://
    kb = engine.open_kb("docs")                               # created on first use
    engine.ingest(kb, [Path("docs/")])                        # -> IngestReport
    result = engine.ask(kb, "How is varenicline dosed?")      # -> Answer | Refusal
    engine.ask(kb, "And its side effects?",                   # a follow-up, read with the
               history=[citewise.Turn("user", "How is varenicline dosed?")])  # turns before it
    found = engine.retrieve(kb, "varenicline dose")           # -> Retrieved (no answer)
    decided = engine.decide(kb, "varenicline dose")           # -> Decided: retrieval, signals, gate

The names below are the public surface; everything else lives in modules that may change.
Only the errors are imported with the package: the rest load on first use, so that
``import citewise`` (and ``citewise --help``) stays light and never loads the model.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

from citewise.errors import (
    AccessError,
    AlreadyExistsError,
    BusyError,
    CitewiseError,
    ConfigError,
    DimensionMismatchError,
    DocumentError,
    EmbedderError,
    FeedbackGivenError,
    FetchError,
    ForbiddenError,
    GenerationError,
    JobError,
    KnowledgeBaseError,
    NotAllowedError,
    PassageLinkError,
    QueryError,
    QueryLogError,
    RateLimitError,
    StoreError,
    TenantError,
    TenantExistsError,
    TooFewLabelsError,
    UnknownNameError,
    UnsupportedTypeError,
    UploadTooLargeError,
)

if TYPE_CHECKING:
    from citewise.engine import Decided, Engine, IngestReport
    from citewise.kb import KnowledgeBase
    from citewise.records import Answer, Candidate, Citation, Decision, Dropped, Refusal, Signals, Turn
    from citewise.search.retrieval import Retrieved
    from citewise.stores import Store, open_store

_LAZY = {
    "open_store": ".stores", "Store": ".stores",
    "Engine": ".engine", "Decided": ".engine", "IngestReport": ".engine",
    "KnowledgeBase": ".kb",
    "Answer": ".records", "Refusal": ".records", "Citation": ".records",
    "Candidate": ".records", "Decision": ".records", "Signals": ".records", "Turn": ".records",
    "Dropped": ".records",
    "Retrieved": ".search.retrieval",
}


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("citewise")
    except PackageNotFoundError:  # a source tree that was never installed
        return "0+unknown"


def __getattr__(name: str) -> Any:
    if name == "__version__":
        value: Any = _version()
    elif name in _LAZY:
        value = getattr(import_module(_LAZY[name], __name__), name)
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY, "__version__"})


__all__ = [
    "AccessError",
    "AlreadyExistsError",
    "Answer",
    "BusyError",
    "Candidate",
    "Citation",
    "CitewiseError",
    "ConfigError",
    "Decided",
    "Decision",
    "DimensionMismatchError",
    "DocumentError",
    "Dropped",
    "EmbedderError",
    "Engine",
    "FeedbackGivenError",
    "FetchError",
    "ForbiddenError",
    "GenerationError",
    "IngestReport",
    "JobError",
    "KnowledgeBase",
    "KnowledgeBaseError",
    "NotAllowedError",
    "PassageLinkError",
    "QueryError",
    "QueryLogError",
    "RateLimitError",
    "Refusal",
    "Retrieved",
    "Signals",
    "Store",
    "StoreError",
    "TenantError",
    "TenantExistsError",
    "TooFewLabelsError",
    "Turn",
    "UnknownNameError",
    "UnsupportedTypeError",
    "UploadTooLargeError",
    "__version__",
    "open_store",
]
