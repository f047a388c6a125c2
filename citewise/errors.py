"""Every error citewise raises, in one place.

    CitewiseError                 base: the message says what went wrong and what to do
    ├── ConfigError               a bad spec string, setting or option value
    │   └── UnknownNameError      a spec names a part that is not registered
    ├── DocumentError             a file that cannot be loaded (unreadable, empty, binary, too
    │                             large once inflated, too deeply nested, ...); ``file`` is its
    │                             id, ``reason`` the message without it
    ├── KnowledgeBaseError        a knowledge base that does not exist, or already exists
    ├── StoreError                the store cannot be opened, migrated or written
    ├── EmbedderError             the embedding model cannot be loaded or gave bad vectors
    │   └── DimensionMismatchError  vectors whose size differs from the knowledge base's
    ├── GenerationError           a generator that failed after its retries
    ├── QueryError                an empty or oversized question, a bad query file
    ├── QueryLogError             no such query-log entry in this knowledge base; a replay or
    │                             switch-over that cannot run
    ├── TenantError               a tenant that does not exist, or already exists
    └── AccessError               no key, or an unknown or revoked one (HTTP 401)
        ├── ForbiddenError        a valid key not allowed this request or origin (HTTP 403)
        └── RateLimitError        a key over its request rate; ``retry_after`` seconds (HTTP 429)

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


class DocumentError(CitewiseError):
    """A file that cannot be turned into a document; it is skipped, nothing stored changes.

    ``file`` names it by its document id (its path relative to the folder ingested), never by
    a server path; the message is ``"{file}: {reason}"``, or the reason alone without a file."""

    def __init__(self, reason: str, file: str | None = None) -> None:
        self.reason, self.file = reason, file
        super().__init__(f"{file}: {reason}" if file else reason)


class KnowledgeBaseError(CitewiseError):
    """A knowledge base is missing, or one of that name already exists."""


class StoreError(CitewiseError):
    """The store cannot be opened, migrated or written."""


class EmbedderError(CitewiseError):
    """The embedding model cannot be loaded, or returned unusable vectors."""


class DimensionMismatchError(EmbedderError):
    """Vectors whose dimension differs from the one recorded on the knowledge base."""


class GenerationError(CitewiseError):
    """The generator failed after its retries; the engine turns this into a refusal."""


class QueryError(CitewiseError):
    """An empty or oversized question, or a query file that cannot be read."""


class QueryLogError(CitewiseError):
    """A query-log entry that is not in the caller's knowledge base (missing or another's: the
    message is the same), or a replay / switch-over that cannot run as asked."""


class TenantError(CitewiseError):
    """A tenant that does not exist, or one of that name already exists."""


class AccessError(CitewiseError):
    """No API key, or one that is unknown or revoked."""


class ForbiddenError(AccessError):
    """A valid key that may not make this request (another scope, another origin)."""


class RateLimitError(AccessError):
    """A key over its per-minute request rate; retry after ``retry_after`` seconds."""

    def __init__(self, retry_after: int) -> None:
        self.retry_after = retry_after
        super().__init__(f"Too many requests for this key; retry after {retry_after} s.")
