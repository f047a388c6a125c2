"""``/v1/admin``: tenants and their API keys, for the holder of the admin key only."""

from __future__ import annotations

import dataclasses

from fastapi import APIRouter, Depends, Path, Response

from citewise.api.deps import Services, get_services, require_admin
from citewise.api.models import KeyIn, KeyOut, NewKeyOut, TenantIn, TenantOut
from citewise.api.settings import Settings, get_settings
from citewise.errors import TenantError
from citewise.tenancy import ApiKey, check_key_scope

router = APIRouter(prefix="/v1/admin", tags=["admin"], dependencies=[Depends(require_admin)])


def key_out(key: ApiKey) -> dict:
    data = dataclasses.asdict(key)
    data.pop("tenant_id")
    data["origins"] = list(key.origins)
    return data


@router.post("/tenants", status_code=201, response_model=TenantOut)
def create_tenant(body: TenantIn, services: Services = Depends(get_services)) -> dict:
    """Create a tenant: a wall around knowledge bases and the keys that reach them."""
    return dataclasses.asdict(services.tenants().create_tenant(body.name))


@router.get("/tenants", response_model=list[TenantOut])
def list_tenants(services: Services = Depends(get_services)) -> list[dict]:
    return [dataclasses.asdict(t) for t in services.tenants().list_tenants()]


@router.post("/tenants/{tenant}/keys", status_code=201, response_model=NewKeyOut)
def create_key(tenant: str, body: KeyIn, services: Services = Depends(get_services),
               settings: Settings = Depends(get_settings)) -> dict:
    """Create an API key. The key is in this response only; the store keeps its sha256.

    A ``widget`` key needs ``kb`` (the one knowledge base it may ask) and at least one origin
    (``https://shop.example.com``) it is accepted from."""
    tenants = services.tenants()
    owner = tenants.get_tenant(tenant)
    kb, origins = check_key_scope(body.kind, body.kb, body.origins)
    key, token = tenants.create_key(owner, body.kind, kb, origins,
                                    body.rate_per_minute or settings.rate_per_minute, body.label)
    services.origins.forget()  # its origins may be preflighted at once
    return {**key_out(key), "key": token}


@router.get("/tenants/{tenant}/keys", response_model=list[KeyOut])
def list_keys(tenant: str, services: Services = Depends(get_services)) -> list[dict]:
    """The tenant's keys (never the keys themselves: only their first characters)."""
    tenants = services.tenants()
    return [key_out(k) for k in tenants.list_keys(tenants.get_tenant(tenant))]


@router.delete("/tenants/{tenant}/keys/{key_id}", status_code=204, response_class=Response)
def revoke_key(tenant: str, key_id: int = Path(..., ge=1, le=2**62),
               services: Services = Depends(get_services)) -> Response:
    """Revoke a key; requests with it are refused from now on (by other server processes,
    within ``CITEWISE_KEY_CACHE_S`` seconds)."""
    tenants = services.tenants()
    if not tenants.revoke_key(tenants.get_tenant(tenant), key_id):
        raise TenantError(f"No active key {key_id} for tenant {tenant!r}")
    services.keys.forget(key_id)
    services.origins.forget()
    return Response(status_code=204)
