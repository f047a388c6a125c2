"""``TenantStore`` over a ``SQLiteStore``'s own connection (tables of migration m003_tenants)."""

from __future__ import annotations

import json
import sqlite3
from typing import Any

from ..errors import AlreadyExistsError, TenantError, TenantExistsError
from ..kb import check_name, valid_name
from ..tenancy import ApiKey, KeyKind, Tenant, check_label, hash_token, new_token
from .sqlite import SQLiteStore, _now

_KEY_COLUMNS = ("id, tenant_id, prefix, kind, kb_name, origins, rate_per_minute, label, "
                "created_at, revoked_at")


def _key(row: tuple[Any, ...]) -> ApiKey:
    return ApiKey(row[0], row[1], row[2], row[3], row[4], tuple(json.loads(row[5])), row[6],
                  row[7], row[8], row[9])


class SQLiteTenants:
    def __init__(self, store: SQLiteStore) -> None:
        self.store = store
        self.db = store.db

    # -- tenants --------------------------------------------------------------------------

    def create_tenant(self, name: str) -> Tenant:
        check_name(name)
        with self.store.transaction() as db:
            try:
                db.execute("INSERT INTO tenants (name, created_at) VALUES (?, ?)", (name, _now()))
            except sqlite3.IntegrityError:
                raise TenantExistsError(f"Tenant {name!r} already exists") from None
        return self.get_tenant(name)

    def get_tenant(self, name: str) -> Tenant:
        row = self.db.execute(
            "SELECT id, name, created_at FROM tenants WHERE name = ?", (name,)
        ).fetchone() if valid_name(name) else None
        if row is None:
            raise TenantError(f"No tenant named {name!r}; create it with `citewise tenant create {name}`")
        return Tenant(*row)

    def list_tenants(self) -> list[Tenant]:
        return [Tenant(*r) for r in self.db.execute("SELECT id, name, created_at FROM tenants ORDER BY name")]

    # -- keys -----------------------------------------------------------------------------

    def create_key(self, tenant: Tenant, kind: KeyKind, kb: str | None, origins: tuple[str, ...],
                   rate_per_minute: int, label: str = "") -> tuple[ApiKey, str]:
        check_label(label)
        token = new_token()
        with self.store.transaction() as db:
            cur = db.execute(
                "INSERT INTO api_keys (tenant_id, key_hash, prefix, kind, kb_name, origins, "
                "rate_per_minute, label, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (tenant.id, hash_token(token), token[:10], kind, kb, json.dumps(list(origins)),
                 rate_per_minute, label, _now()),
            )
        row = self.db.execute(f"SELECT {_KEY_COLUMNS} FROM api_keys WHERE id = ?",
                              (cur.lastrowid,)).fetchone()
        return _key(row), token

    def key_for_token(self, token: str) -> ApiKey | None:
        row = self.db.execute(
            f"SELECT {_KEY_COLUMNS} FROM api_keys WHERE key_hash = ? AND revoked_at IS NULL",
            (hash_token(token),),
        ).fetchone()
        return _key(row) if row else None

    def list_keys(self, tenant: Tenant) -> list[ApiKey]:
        rows = self.db.execute(
            f"SELECT {_KEY_COLUMNS} FROM api_keys WHERE tenant_id = ? ORDER BY id", (tenant.id,)
        )
        return [_key(r) for r in rows]

    def revoke_key(self, tenant: Tenant, key_id: int) -> bool:
        with self.store.transaction() as db:
            cur = db.execute(
                "UPDATE api_keys SET revoked_at = ? WHERE id = ? AND tenant_id = ? "
                "AND revoked_at IS NULL",
                (_now(), key_id, tenant.id),
            )
        return cur.rowcount > 0

    # -- ownership ------------------------------------------------------------------------

    def own_kb(self, tenant_id: int, name: str, kb_id: int) -> None:
        """Record the owner; ``AlreadyExistsError`` if the tenant has that name or the
        knowledge base has an owner (two requests creating one name at once: one wins)."""
        with self.store.transaction() as db:
            try:
                db.execute("INSERT INTO kb_owners (kb_id, tenant_id, name) VALUES (?, ?, ?)",
                           (kb_id, tenant_id, name))
            except sqlite3.IntegrityError:
                if not db.execute("SELECT 1 FROM kb_owners WHERE kb_id = ? OR (tenant_id = ? "
                                  "AND name = ?)", (kb_id, tenant_id, name)).fetchone():
                    raise
                raise AlreadyExistsError(f"Knowledge base {name!r} already exists") from None

    def owned_kb(self, tenant_id: int, name: str) -> int | None:
        row = self.db.execute(
            "SELECT kb_id FROM kb_owners WHERE tenant_id = ? AND name = ?", (tenant_id, name)
        ).fetchone() if valid_name(name) else None
        return row[0] if row else None

    def owned_kbs(self, tenant_id: int) -> list[tuple[str, int]]:
        rows = self.db.execute(
            "SELECT name, kb_id FROM kb_owners WHERE tenant_id = ? ORDER BY name", (tenant_id,)
        )
        return [(r[0], r[1]) for r in rows]
