"""``store.tenants``: the ``Tenants`` of ``tenancy.py`` in the store's own database (tables of
migration m003_tenants). Writes run in the store's transactions, reads in autocommit, so every
worker sees keys created or revoked by another on its next request. Which knowledge bases a
tenant owns is the ``tenant_id`` column of ``kbs`` (migration m011), read by the store itself.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, cast

from citewise.errors import TenantError, TenantExistsError
from citewise.kb import KBConfig, KnowledgeBase, check_name, valid_name
from citewise.stores.database import Database, now
from citewise.tenancy import ApiKey, KeyKind, Tenant, check_label, hash_token, new_token

if TYPE_CHECKING:  # roles.py names this module's Tenants role
    from citewise.stores.roles import Store

_KEY_COLUMNS = ("id, tenant_id, prefix, kind, kb_name, origins, rate_per_minute, label, "
                "created_at, revoked_at")


def _key(row: tuple[Any, ...]) -> ApiKey:
    return ApiKey(int(row[0]), int(row[1]), row[2], row[3], row[4], tuple(json.loads(row[5])),
                  int(row[6]), row[7], row[8], row[9])


def _tenant(row: tuple[Any, ...]) -> Tenant:
    return Tenant(int(row[0]), row[1], row[2])


class SQLTenants:
    def __init__(self, db: Database) -> None:
        self.db = db

    # -- tenants --------------------------------------------------------------------------

    def create_tenant(self, name: str) -> Tenant:
        check_name(name)
        self.db.insert_new("INSERT INTO tenants (name, created_at) VALUES (%s, %s)", (name, now()),
                           lambda: bool(self._tenant_rows(name)),
                           TenantExistsError(f"Tenant {name!r} already exists"))
        return self.get_tenant(name)

    def _tenant_rows(self, name: str) -> list[tuple[Any, ...]]:
        return self.db.rows("SELECT id, name, created_at FROM tenants WHERE name = %s",
                            (name,)) if valid_name(name) else []

    def get_tenant(self, name: str) -> Tenant:
        rows = self._tenant_rows(name)
        if not rows:
            raise TenantError(f"No tenant named {name!r}; create it with `citewise tenant create {name}`")
        return _tenant(rows[0])

    def list_tenants(self) -> list[Tenant]:
        return [_tenant(r) for r in self.db.rows("SELECT id, name, created_at FROM tenants ORDER BY name")]

    # -- keys -----------------------------------------------------------------------------

    def create_key(self, tenant: Tenant, kind: KeyKind, kb: str | None, origins: tuple[str, ...],
                   rate_per_minute: int, label: str = "") -> tuple[ApiKey, str]:
        check_label(label)
        token = new_token()
        with self.db.transaction() as cur:
            key_id = self.db.insert_id(
                cur,
                "INSERT INTO api_keys (tenant_id, key_hash, prefix, kind, kb_name, origins, "
                "rate_per_minute, label, created_at) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s)",
                (tenant.id, hash_token(token), token[:10], kind, kb, json.dumps(list(origins)),
                 rate_per_minute, label, now()),
            )
        rows = self.db.rows(f"SELECT {_KEY_COLUMNS} FROM api_keys WHERE id = %s", (key_id,))
        return _key(rows[0]), token

    def key_for_token(self, token: str) -> ApiKey | None:
        rows = self.db.rows(
            f"SELECT {_KEY_COLUMNS} FROM api_keys WHERE key_hash = %s AND revoked_at IS NULL",
            (hash_token(token),),
        )
        return _key(rows[0]) if rows else None

    def list_keys(self, tenant: Tenant) -> list[ApiKey]:
        return [_key(r) for r in self.db.rows(
            f"SELECT {_KEY_COLUMNS} FROM api_keys WHERE tenant_id = %s ORDER BY id", (tenant.id,))]

    def widget_origins(self) -> set[str]:
        rows = self.db.rows("SELECT origins FROM api_keys WHERE kind = 'widget' "
                            "AND revoked_at IS NULL")
        return {origin for (origins,) in rows for origin in json.loads(origins)}

    def revoke_key(self, tenant: Tenant, key_id: int) -> bool:
        with self.db.transaction() as cur:
            cur.execute("UPDATE api_keys SET revoked_at = %s WHERE id = %s AND tenant_id = %s "
                        "AND revoked_at IS NULL", (now(), int(key_id), tenant.id))
            return int(cur.rowcount) > 0


class OneTenant:
    """The store seen from one tenant: its knowledge bases by name are that tenant's (the
    CLI's ``--tenant``, for an operator looking after a tenant's knowledge bases); every other
    call goes to the store, whose reads and writes take the knowledge base itself, so they
    stay inside it. ``tests/test_tenancy.py`` runs the content conformance class on it."""

    def __init__(self, store: Store, tenant: Tenant) -> None:
        self.store, self.tenant = store, tenant

    def create_kb(self, name: str, config: KBConfig, tenant: int = 0) -> KnowledgeBase:
        return self.store.create_kb(name, config, self.tenant.id)

    def get_kb(self, name: str, tenant: int = 0) -> KnowledgeBase:
        return self.store.get_kb(name, self.tenant.id)

    def list_kbs(self, tenant: int = 0) -> list[KnowledgeBase]:
        return self.store.list_kbs(self.tenant.id)

    def update_kb(self, name: str, config: KBConfig, tenant: int = 0) -> KnowledgeBase:
        return self.store.update_kb(name, config, self.tenant.id)

    def delete_kb(self, name: str, tenant: int = 0) -> None:
        self.store.delete_kb(name, self.tenant.id)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.store, name)

    def as_store(self) -> Store:
        """This view where a ``Store`` is taken: the five methods above are the store's by
        name, and every other attribute is the store's own."""
        return cast("Store", self)
