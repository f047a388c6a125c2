"""``TenantStore`` over a MySQL or PostgreSQL store's own connection (tables of migration
m003_tenants): ``sqlite_tenants`` with ``%s`` placeholders. Writes run in the store's
transactions, reads in autocommit, so every worker sees keys created or revoked by another
on its next request."""

from __future__ import annotations

import json
from typing import Any

from ..errors import AlreadyExistsError, StoreError, TenantError, TenantExistsError
from ..kb import check_name, valid_name
from ..tenancy import ApiKey, KeyKind, Tenant, check_label, hash_token, new_token
from .server import ServerStore, now

_KEY_COLUMNS = ("id, tenant_id, prefix, kind, kb_name, origins, rate_per_minute, label, "
                "created_at, revoked_at")


def _key(row: tuple[Any, ...]) -> ApiKey:
    return ApiKey(int(row[0]), int(row[1]), row[2], row[3], row[4], tuple(json.loads(row[5])),
                  int(row[6]), row[7], row[8], row[9])


def _tenant(row: tuple[Any, ...]) -> Tenant:
    return Tenant(int(row[0]), row[1], row[2])


class ServerTenants:
    def __init__(self, store: ServerStore) -> None:
        self.store = store

    # -- tenants --------------------------------------------------------------------------

    def create_tenant(self, name: str) -> Tenant:
        check_name(name)
        try:
            with self.store.transaction() as cur:
                cur.execute("INSERT INTO tenants (name, created_at) VALUES (%s, %s)", (name, now()))
        except StoreError:
            if self.store._rows("SELECT 1 FROM tenants WHERE name = %s", (name,)):
                raise TenantExistsError(f"Tenant {name!r} already exists") from None
            raise
        return self.get_tenant(name)

    def get_tenant(self, name: str) -> Tenant:
        rows = self.store._rows("SELECT id, name, created_at FROM tenants WHERE name = %s",
                                (name,)) if valid_name(name) else []
        if not rows:
            raise TenantError(f"No tenant named {name!r}; create it with `citewise tenant create {name}`")
        return _tenant(rows[0])

    def list_tenants(self) -> list[Tenant]:
        return [_tenant(r) for r in self.store._rows(
            "SELECT id, name, created_at FROM tenants ORDER BY name")]

    # -- keys -----------------------------------------------------------------------------

    def create_key(self, tenant: Tenant, kind: KeyKind, kb: str | None, origins: tuple[str, ...],
                   rate_per_minute: int, label: str = "") -> tuple[ApiKey, str]:
        check_label(label)
        token = new_token()
        with self.store.transaction() as cur:
            key_id = self.store._insert_id(
                cur,
                "INSERT INTO api_keys (tenant_id, key_hash, prefix, kind, kb_name, origins, "
                "rate_per_minute, label, created_at) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s)",
                (tenant.id, hash_token(token), token[:10], kind, kb, json.dumps(list(origins)),
                 rate_per_minute, label, now()),
            )
        rows = self.store._rows(f"SELECT {_KEY_COLUMNS} FROM api_keys WHERE id = %s", (key_id,))
        return _key(rows[0]), token

    def key_for_token(self, token: str) -> ApiKey | None:
        rows = self.store._rows(
            f"SELECT {_KEY_COLUMNS} FROM api_keys WHERE key_hash = %s AND revoked_at IS NULL",
            (hash_token(token),),
        )
        return _key(rows[0]) if rows else None

    def list_keys(self, tenant: Tenant) -> list[ApiKey]:
        return [_key(r) for r in self.store._rows(
            f"SELECT {_KEY_COLUMNS} FROM api_keys WHERE tenant_id = %s ORDER BY id", (tenant.id,))]

    def revoke_key(self, tenant: Tenant, key_id: int) -> bool:
        with self.store.transaction() as cur:
            cur.execute(
                "UPDATE api_keys SET revoked_at = %s WHERE id = %s AND tenant_id = %s "
                "AND revoked_at IS NULL",
                (now(), int(key_id), tenant.id),
            )
            return cur.rowcount > 0

    # -- ownership ------------------------------------------------------------------------

    def own_kb(self, tenant_id: int, name: str, kb_id: int) -> None:
        """Record the owner; ``AlreadyExistsError`` if the tenant has that name or the
        knowledge base has an owner (two requests creating one name at once: one wins; the
        loser's insert waits on the winner's row, so the read after it sees that row)."""
        try:
            with self.store.transaction() as cur:
                cur.execute("INSERT INTO kb_owners (kb_id, tenant_id, name) VALUES (%s, %s, %s)",
                            (kb_id, tenant_id, name))
        except StoreError:
            if self.store._rows("SELECT 1 FROM kb_owners WHERE kb_id = %s OR (tenant_id = %s "
                                "AND name = %s)", (kb_id, tenant_id, name)):
                raise AlreadyExistsError(f"Knowledge base {name!r} already exists") from None
            raise

    def owned_kb(self, tenant_id: int, name: str) -> int | None:
        if not valid_name(name):
            return None
        rows = self.store._rows(
            "SELECT kb_id FROM kb_owners WHERE tenant_id = %s AND name = %s", (tenant_id, name)
        )
        return int(rows[0][0]) if rows else None

    def owned_kbs(self, tenant_id: int) -> list[tuple[str, int]]:
        rows = self.store._rows(
            "SELECT name, kb_id FROM kb_owners WHERE tenant_id = %s ORDER BY name", (tenant_id,)
        )
        return [(r[0], int(r[1])) for r in rows]
