"""Every error citewise raises, in one place.

    CitewiseError                 base: the message says what went wrong and what to do
    ├── ConfigError               a bad spec string, setting or option value
    │   ├── UnknownNameError      a spec names a part that is not registered
    │   └── NotAllowedError       an embedder or generator the server's operator did not allow
    ├── DocumentError             a file that cannot be loaded (unreadable, empty, binary, too
    │   │                         large once inflated, too deeply nested, ...); ``file`` is its
    │   │                         id, ``reason`` the message without it
    │   ├── UploadTooLargeError   an uploaded file over the server's upload limit (HTTP 413)
    │   ├── UnsupportedTypeError  a file type no loader reads (HTTP 415 for an upload)
    │   └── FetchError            a web page that cannot be fetched, or is refused (over the
    │                             size limit, disallowed by robots.txt); ``status`` is the HTTP
    │                             status when the server answered with an error
    ├── KnowledgeBaseError        a knowledge base that does not exist, or already exists
    │   └── AlreadyExistsError    one of that name already exists (HTTP 409)
    ├── StoreError                the store cannot be opened, migrated or written
    ├── EmbedderError             the embedding model cannot be loaded or gave bad vectors
    │   └── DimensionMismatchError  vectors whose size differs from the knowledge base's
    ├── GenerationError           a generator that failed after its retries
    ├── QueryError                an empty or oversized question, a bad query file, text a
    │   │                         store cannot keep (a NUL character, a lone surrogate)
    │   └── TooFewLabelsError     too few labelled covered questions to bound their refusal at
    │                             the confidence asked; ``needed`` says how many would do
    ├── QueryLogError             no such query-log entry in this knowledge base; a replay or
    │   │                         switch-over that cannot run
    │   └── FeedbackGivenError    the answer already has its feedback (HTTP 409)
    ├── TenantError               a tenant that does not exist, or already exists
    │   └── TenantExistsError     one of that name already exists (HTTP 409)
    ├── JobError                  no such ingestion job for this tenant (HTTP 404)
    └── AccessError               no key, or an unknown or revoked one (HTTP 401)
        ├── ForbiddenError        a valid key not allowed this request or origin (HTTP 403)
        ├── PassageLinkError      a link to a passage that is not valid (HTTP 404) or has
        │                         expired (410); ``status`` says which
        └── RateLimitError        a key over its request rate; ``retry_after`` seconds (HTTP 429)
            └── BusyError         a tenant with too many requests running or waiting at once

Library code raises these; only the CLI turns them into exit messages and only the HTTP
service into responses. A message never names another knowledge base than the caller's.
"""

from __future__ import annotations


class CitewiseError(Exception):
    """Base of all citewise errors."""


class ConfigError(CitewiseError):
    """A spec string, setting or option is not valid."""


class UnknownNameError(ConfigError):
    """A spec names a part that is not registered; the message lists the valid names."""

    def __init__(self, kind: str, name: str, valid: list[str]) -> None:
        self.kind, self.name, self.valid = kind, name, sorted(valid)
        super().__init__(
            f"Unknown {kind} {name!r}. Valid {kind} names: {', '.join(self.valid)}."
        )


class NotAllowedError(ConfigError):
    """An embedder or generator spec that is not on the server's allowlist; the message lists
    the allowed ones."""

    def __init__(self, kind: str, spec: str, allowed: list[str], what: str | None = None) -> None:
        self.kind, self.spec, self.allowed = kind, spec, list(allowed)
        what = what or f"{kind} {spec!r} is"
        super().__init__(
            f"The {what} not allowed on this server. Allowed {kind}s: {', '.join(self.allowed)}."
        )


class DocumentError(CitewiseError):
    """A file that cannot be turned into a document; it is skipped, nothing stored changes.

    ``file`` names it by its document id (its path relative to the folder ingested), never by
    a server path; the message is ``"{file}: {reason}"``, or the reason alone without a file."""

    def __init__(self, reason: str, file: str | None = None) -> None:
        self.reason, self.file = reason, file
        super().__init__(f"{file}: {reason}" if file else reason)


class UploadTooLargeError(DocumentError):
    """An uploaded file over the server's per-file upload limit; it is not read further."""


class UnsupportedTypeError(DocumentError):
    """A file whose type (its suffix) no loader reads; the message lists the supported ones."""


class FetchError(DocumentError):
    """A web page that cannot be fetched or is refused; ``status`` is the HTTP status the
    server answered (404, 503, ...), or None when it answered none or was not asked."""

    def __init__(self, reason: str, file: str | None = None, status: int | None = None) -> None:
        super().__init__(reason, file)
        self.status = status


class KnowledgeBaseError(CitewiseError):
    """A knowledge base is missing, or one of that name already exists."""


class AlreadyExistsError(KnowledgeBaseError):
    """A knowledge base of that name already exists (a store's unique name, or its owner row)."""


class StoreError(CitewiseError):
    """The store cannot be opened, migrated or written."""


class EmbedderError(CitewiseError):
    """The embedding model cannot be loaded, or returned unusable vectors."""


class DimensionMismatchError(EmbedderError):
    """Vectors whose dimension differs from the one recorded on the knowledge base."""


class GenerationError(CitewiseError):
    """The generator failed after its retries; the engine turns this into a refusal."""


class QueryError(CitewiseError):
    """An empty or oversized question, a query file that cannot be read, or a question or
    comment holding text no store can keep (a NUL character, a lone surrogate)."""


class TooFewLabelsError(QueryError):
    """Labelled covered questions too few (or too many refused whatever the threshold) to
    bound the share refused within the budget at the confidence asked; ``needed`` is how many
    covered questions, none refused, would do."""

    def __init__(self, message: str, needed: int) -> None:
        self.needed = needed
        super().__init__(message)


class QueryLogError(CitewiseError):
    """A query-log entry that is not in the caller's knowledge base (missing or another's: the
    message is the same), or a replay / switch-over that cannot run as asked."""


class FeedbackGivenError(QueryLogError):
    """Feedback on an answer that already has its feedback: the first one stays."""


class TenantError(CitewiseError):
    """A tenant that does not exist, or one of that name already exists."""


class JobError(CitewiseError):
    """No ingestion job of that id for the caller's tenant (another tenant's reads the same)."""


class TenantExistsError(TenantError):
    """A tenant of that name already exists."""


class AccessError(CitewiseError):
    """No API key, or one that is unknown or revoked."""


class ForbiddenError(AccessError):
    """A valid key that may not make this request (another scope, another origin)."""


class PassageLinkError(AccessError):
    """A link to a cited passage whose signature does not hold (404) or that expired (410)."""

    def __init__(self, message: str, status: int = 404) -> None:
        super().__init__(message)
        self.status = status


class RateLimitError(AccessError):
    """A key over its per-minute request rate; retry after ``retry_after`` seconds."""

    def __init__(self, retry_after: int) -> None:
        self.retry_after = retry_after
        super().__init__(f"Too many requests for this key; retry after {retry_after} s.")


class BusyError(RateLimitError):
    """A tenant with as many requests running and waiting as it may have; retry shortly."""

    def __init__(self, retry_after: int, at_once: int) -> None:
        super().__init__(retry_after)
        self.args = (f"Too many requests of this tenant at once ({at_once} running or waiting); "
                     f"retry after {retry_after} s.",)
