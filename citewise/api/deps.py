"""What routes depend on: the per-process services, the caller behind an API key, and the
knowledge base a caller may reach. A knowledge base of another tenant is reported exactly like
a missing one, so no answer tells that it exists.

FastAPI runs a plain-function dependency in a worker thread (a hand-off each way, and a place
in the thread pool that busy asks may fill), so the dependencies that only read objects in
memory (``get_services``, ``get_token``, ``tenant_caller``) are async and the ones that read
the store (``get_caller``, ``askable_kb``) are plain; ``ask`` resolves its knowledge base in its
own thread, so it takes two hand-offs (the key check, the route), where it took seven.
"""

from __future__ import annotations

import hmac
from contextlib import AbstractContextManager
from dataclasses import dataclass

from fastapi import Depends, Path, Request, Security
from fastapi.security import APIKeyHeader, HTTPAuthorizationCredentials, HTTPBearer

from citewise.api.compute import check_kb
from citewise.api.services import Services, services_for
from citewise.api.settings import Settings, get_settings, settings_of
from citewise.engine import Engine
from citewise.errors import AccessError, ForbiddenError, KnowledgeBaseError
from citewise.kb import KnowledgeBase
from citewise.tenancy import ApiKey, rate_name


async def get_services(request: Request) -> Services:
    return services_for(request.app, settings_of(request.app))


bearer = HTTPBearer(auto_error=False, description="An API key: `Authorization: Bearer cw_...`")
key_header = APIKeyHeader(name="X-API-Key", auto_error=False, description="An API key, the same")


async def get_token(
    credentials: HTTPAuthorizationCredentials | None = Security(bearer),
    header: str | None = Security(key_header),
) -> str | None:
    return credentials.credentials if credentials else header


def same_origin(request: Request) -> str:
    """This service's origin, for a browser's request from a page of its own (the widget on
    ``/demo`` opening a passage): a browser sends no ``Origin`` with a GET to its page's origin,
    but says ``Sec-Fetch-Site: same-origin``, a header no page can set (sent over HTTPS and to
    localhost). Else "": a request without ``Origin`` is from no page."""
    if request.headers.get("sec-fetch-site") != "same-origin":
        return ""
    return f"{request.url.scheme}://{request.url.netloc}".lower()


@dataclass(frozen=True)
class Caller:
    key: ApiKey
    services: Services


def get_caller(request: Request, token: str | None = Depends(get_token),
               services: Services = Depends(get_services)) -> Caller:
    if not token:
        raise AccessError("No API key: send `Authorization: Bearer KEY` or `X-API-Key: KEY`.")
    key = services.keys.lookup(token, services.tenants().key_for_token)
    if key is None:
        raise AccessError("Unknown or revoked API key.")
    if key.kind == "widget":
        origin = (request.headers.get("origin") or "").lower() or same_origin(request)
        if origin not in key.origins:
            raise ForbiddenError(
                f"This widget key is not allowed from origin {origin or '(none)'}; "
                "add the origin to the key, or create a key for it."
            )
        request.state.cors_origin = origin
    services.limiter.check(rate_name(key), key.rate_per_minute)
    return Caller(key, services)


def tenant_only(caller: Caller) -> Caller:
    if caller.key.kind != "tenant":
        raise ForbiddenError("A widget key can only ask its knowledge base; use a tenant key for this.")
    return caller


async def tenant_caller(caller: Caller = Depends(get_caller)) -> Caller:
    return tenant_only(caller)


def require_admin(token: str | None = Depends(get_token),
                  settings: Settings = Depends(get_settings)) -> None:
    expected = settings.require_admin_key()
    if not token:
        raise AccessError("This needs the admin key: send `Authorization: Bearer $CITEWISE_ADMIN_KEY`.")
    if not hmac.compare_digest(token.encode(), expected.encode()):
        raise ForbiddenError("This needs the admin key (CITEWISE_ADMIN_KEY).")


@dataclass(frozen=True)
class Scoped:
    """A knowledge base of the caller's tenant, and the caller."""

    kb: KnowledgeBase
    caller: Caller

    @property
    def name(self) -> str:
        return self.kb.name

    def engine(self) -> Engine:
        return self.caller.services.engine()

    def compute(self) -> AbstractContextManager[None]:
        """Hold while embedding: ``with s.compute(): s.engine().ask(...)``. Refuses a knowledge
        base whose embedder or generator the operator does not allow, before any call."""
        self.check_compute()
        return self.caller.services.compute.hold(self.caller.key.tenant_id)

    def check_compute(self) -> None:
        """What ``compute`` refuses, checked without taking a place."""
        services = self.caller.services
        check_kb(self.name, self.kb.config, services.settings)
        services.compute.check(self.caller.key.tenant_id)


def missing(name: str) -> KnowledgeBaseError:
    return KnowledgeBaseError(f"No knowledge base named {name!r}")


def resolve(caller: Caller, name: str) -> Scoped:
    """The caller's tenant's knowledge base of that name: one look-up, scoped to the tenant."""
    if caller.key.kind == "widget" and name != caller.key.kb:
        raise missing(name)
    try:
        kb = caller.services.store().get_kb(name, tenant=caller.key.tenant_id)
    except KnowledgeBaseError:
        raise missing(name) from None
    return Scoped(kb, caller)


KB_PATH = Path(..., min_length=1, max_length=64, description="The knowledge base's name.",
               examples=["docs"])


def tenant_kb(kb: str = KB_PATH, caller: Caller = Depends(tenant_caller)) -> Scoped:
    """A knowledge base of the caller's tenant, for tenant keys only."""
    return resolve(caller, kb)


def askable_kb(kb: str = KB_PATH, caller: Caller = Depends(get_caller)) -> Scoped:
    """A knowledge base a tenant key owns, or the one a widget key was made for."""
    return resolve(caller, kb)
