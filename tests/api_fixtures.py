"""Fixtures for the HTTP service: an app on a temp SQLite store with the hashing embedder, an
admin key, and a helper that makes a tenant with a key and a knowledge base of the sample."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from citewise.server import Settings, create_app, get_settings
from tests.helpers import SAMPLE

ADMIN_KEY = "admin-" + "x" * 32
ADMIN = {"Authorization": f"Bearer {ADMIN_KEY}"}


def settings_for(db: Path, **kw: object) -> Settings:
    return Settings(db=str(db), admin_key=ADMIN_KEY, embedder="hashing:256", **kw)  # type: ignore[arg-type]


def make_app(settings: Settings) -> FastAPI:
    app = create_app()
    app.dependency_overrides[get_settings] = lambda: settings
    return app


@pytest.fixture(name="api_settings")
def api_settings_fixture(tmp_path: Path) -> Settings:
    return settings_for(tmp_path / "api.db")


@pytest.fixture(name="client")
def client_fixture(api_settings: Settings) -> Iterator[TestClient]:
    with TestClient(make_app(api_settings)) as c:
        yield c


@dataclass
class TenantKey:
    name: str
    key: str

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.key}"}


def tenant(client: TestClient, name: str, **key: object) -> TenantKey:
    r = client.post("/v1/admin/tenants", json={"name": name}, headers=ADMIN)
    assert r.status_code in (201, 409), r.text
    r = client.post(f"/v1/admin/tenants/{name}/keys", json=key, headers=ADMIN)
    assert r.status_code == 201, r.text
    return TenantKey(name, r.json()["key"])


def upload(client: TestClient, who: TenantKey, kb: str, files: dict[str, bytes]) -> dict:
    r = client.post(f"/v1/kbs/{kb}/documents?wait=true", headers=who.headers,
                    files=[("files", (name, data)) for name, data in files.items()])
    return {"status": r.status_code, **r.json()}


def sample_files() -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(SAMPLE.glob("*.md"))}


def kb_with_sample(client: TestClient, who: TenantKey, kb: str = "docs") -> None:
    assert client.post("/v1/kbs", json={"name": kb}, headers=who.headers).status_code == 201
    assert upload(client, who, kb, sample_files())["status"] == 200


COVERED = "varenicline dose schedule days 1 to 3 once daily"
OUT_OF_SCOPE = "quantum chromodynamics lattice gauge"
