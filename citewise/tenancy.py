"""Tenants, their API keys and the knowledge bases they own: the walls of the HTTP service.

- A tenant owns knowledge bases by the names it chose: the store keeps each with its tenant's
  id (``KnowledgeBase.tenant_id``; 0 is the operator's own), names unique per tenant, and every
  look-up of a tenant's knowledge base names the tenant, so two tenants may both have a
  ``docs`` without ever meeting.
- A key is a high-entropy random token (``cw_`` + 256 bits) shown once, at creation; the store
  keeps only its sha256. A ``tenant`` key reaches every knowledge base of its tenant; a
  ``widget`` key may only ask (and open passages and give feedback in) one knowledge base, from
  the browser origins listed on it.
- Every key has a per-minute rate: a token bucket per key, counted in Redis or in the store so
  that every server process shares it (``citewise/ratelimit.py``).

``Tenants`` is the protocol of tenants and keys; a store keeps them in its own database
(``store.tenants``, ``stores/tenants.py``).
"""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal, Protocol

from citewise import storable
from citewise.errors import ConfigError
from citewise.kb import check_name

KeyKind = Literal["tenant", "widget"]
KEY_PREFIX = "cw_"
MAX_KB_NAME = 48  # a tenant's knowledge base name (the operator's may have 64 characters)


@dataclass(frozen=True)
class Tenant:
    id: int
    name: str
    created_at: str


@dataclass(frozen=True)
class ApiKey:
    """A key's record; the token itself is never stored, only its sha256."""

    id: int
    tenant_id: int
    prefix: str
    kind: KeyKind
    kb: str | None
    origins: tuple[str, ...]
    rate_per_minute: int
    label: str
    created_at: str
    revoked_at: str | None = None


def new_token() -> str:
    return KEY_PREFIX + secrets.token_urlsafe(32)


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def check_kb_name(name: str) -> str:
    return check_name(name, MAX_KB_NAME)


def check_label(label: str) -> str:
    """A key's label: free text, but only what every store can keep (``storable.py``)."""
    return storable.check(label, "key label", ConfigError)


def check_origin(origin: str) -> str:
    """``scheme://host[:port]`` exactly as a browser sends it in the Origin header."""
    storable.check(origin, "origin", ConfigError)
    scheme, sep, rest = origin.partition("://")
    if scheme not in ("http", "https") or not sep or not rest or "/" in rest or origin != origin.strip():
        raise ConfigError(
            f"Origin {origin!r} is not scheme://host[:port], e.g. https://shop.example.com"
        )
    return origin.lower()


def check_key_scope(kind: KeyKind, kb: str | None,
                    origins: Iterable[str]) -> tuple[str | None, tuple[str, ...]]:
    """A widget key names one knowledge base and at least one origin; a tenant key neither."""
    clean = tuple(dict.fromkeys(check_origin(o) for o in origins))
    if kind == "widget":
        if not kb or not clean:
            raise ConfigError("A widget key needs its knowledge base (kb) and at least one origin")
        return check_kb_name(kb), clean
    if kb or clean:
        raise ConfigError("A knowledge base and origins belong to widget keys; a tenant key "
                          "reaches every knowledge base of its tenant")
    return None, ()


class Tenants(Protocol):
    """Tenants and their keys, kept beside the knowledge bases (``store.tenants``)."""

    def create_tenant(self, name: str) -> Tenant:
        """``TenantExistsError`` if the name is taken (of two at once, one wins)."""
        ...

    def get_tenant(self, name: str) -> Tenant: ...
    def list_tenants(self) -> list[Tenant]: ...

    def create_key(self, tenant: Tenant, kind: KeyKind, kb: str | None, origins: tuple[str, ...],
                   rate_per_minute: int, label: str = "") -> tuple[ApiKey, str]:
        """A new key and its token, shown this once: only the token's sha256 is kept."""
        ...

    def key_for_token(self, token: str) -> ApiKey | None:
        """The key of a token, if it exists and is not revoked."""
        ...

    def list_keys(self, tenant: Tenant) -> list[ApiKey]: ...

    def widget_origins(self) -> set[str]:
        """The origins listed on every active widget key, of every tenant (CORS preflights)."""
        ...

    def revoke_key(self, tenant: Tenant, key_id: int) -> bool:
        """Whether an active key of ``tenant`` was revoked (another tenant's: False)."""
        ...


def rate_name(key: ApiKey) -> str:
    """The name a key's request rate is counted under (``citewise/ratelimit.py``): its id and
    the random start of its token, so stores sharing one Redis never count each other's key 1."""
    return f"{key.id}.{key.prefix}"
