"""A tenant that floods is refused at the door, before its requests take a worker thread, a
store read or a rate-limit write, while other tenants are answered; verified keys are
remembered briefly and a revoked one is forgotten (``citewise/api/admission.py``)."""

from __future__ import annotations

import threading
import time
from collections import Counter
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from citewise.api.admission import bearer
from citewise.api.keys import KeyCache
from citewise.api.services import services_for
from citewise.engine import Engine
from citewise.ratelimit import RateLimiter
from citewise.stores import open_store
from citewise.stores.tenants import SQLTenants
from citewise.tenancy import ApiKey
from tests.api_fixtures import ADMIN, make_app, sample_files, settings_for, tenant, upload

HELD = "What does the held question ask?"


@pytest.mark.timeout(60)
@pytest.mark.heavy
def test_a_flooding_tenant_is_refused_at_the_door_and_others_are_answered(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    settings = settings_for(tmp_path / "g.db", compute_slots=2, tenant_slots=1, tenant_queue=1)
    release, entered = threading.Event(), threading.Event()
    ask = Engine.ask

    def held_ask(self: Engine, kb, question: str, **kw):
        if question == HELD:
            entered.set()
            assert release.wait(30)
        return ask(self, kb, question, **kw)

    calls: Counter[str] = Counter()
    lookup, check = SQLTenants.key_for_token, RateLimiter.check
    monkeypatch.setattr(Engine, "ask", held_ask)
    monkeypatch.setattr(SQLTenants, "key_for_token",
                        lambda self, token: (calls.update(["key read"]), lookup(self, token))[1])
    monkeypatch.setattr(RateLimiter, "check",
                        lambda self, name, rate: (calls.update([name]), check(self, name, rate))[1])
    with TestClient(make_app(settings)) as client:
        flood, calm = tenant(client, "flood", rate_per_minute=10_000), tenant(client, "calm")
        for who in (flood, calm):
            assert client.post("/v1/kbs", json={"name": "kb"}, headers=who.headers).status_code == 201
            assert upload(client, who, "kb", sample_files())["status"] == 200
        answers: list[int] = []

        def ask_held() -> None:
            r = client.post("/v1/kbs/kb/ask", json={"question": HELD}, headers=flood.headers)
            answers.append(r.status_code)

        inside = [threading.Thread(target=ask_held) for _ in range(2)]  # its slot and its queue
        try:
            inside[0].start()
            assert entered.wait(10)
            inside[1].start()
            time.sleep(0.5)  # the second waits for the tenant's one lane
            before = calls.copy()
            for _ in range(10):
                t = time.monotonic()
                r = client.post("/v1/kbs/kb/ask", json={"question": HELD}, headers=flood.headers)
                assert r.status_code == 429 and r.headers["Retry-After"] == "1", r.text
                assert "at once (2 running or waiting)" in r.json()["detail"]
                assert time.monotonic() - t < 1.0
            assert calls == before  # refused with no key read and no rate-limit write
            # and marked flooding: its next requests run on slots no other tenant wants
            assert len(services_for(client.app, settings).compute.slots._refused) == 1
            r = client.post("/v1/kbs/kb/search", json={"query": "varenicline"}, headers=flood.headers)
            assert r.status_code == 429  # search computes too
            assert client.get("/v1/kbs", headers=flood.headers).status_code == 200  # the rest does not
            r = client.post("/v1/kbs/kb/ask", json={"question": "How long does varenicline take?"},
                            headers=calm.headers)
            assert r.status_code == 200 and r.json()["status"] in ("answered", "refused")
        finally:
            release.set()
            for thread in inside:
                thread.join()
        assert answers == [200, 200]
        r = client.post("/v1/kbs/kb/ask", json={"question": HELD}, headers=flood.headers)
        assert r.status_code == 200  # the tenant's places are free again


def test_an_unknown_key_passes_the_door_and_gets_the_routes_401(tmp_path: Path) -> None:
    with TestClient(make_app(settings_for(tmp_path / "u.db"))) as client:
        r = client.post("/v1/kbs/kb/ask", json={"question": "Anything?"},
                        headers={"Authorization": "Bearer cw_not-a-key"})
        assert r.status_code == 401 and r.json()["detail"] == "Unknown or revoked API key."


@pytest.mark.parametrize("seconds", [0.0, 0.6])
@pytest.mark.heavy
def test_a_key_revoked_by_another_process_is_refused_within_the_cache_seconds(
        tmp_path: Path, seconds: float) -> None:
    db = tmp_path / "k.db"
    with TestClient(make_app(settings_for(db, key_cache_s=seconds))) as client:
        acme = tenant(client, "acme")
        assert client.get("/v1/kbs", headers=acme.headers).status_code == 200
        other = open_store(str(db))  # as the CLI or another worker would
        try:
            assert other.tenants.revoke_key(other.tenants.get_tenant("acme"), 1)
        finally:
            other.close()
        time.sleep(seconds + 0.1)
        assert client.get("/v1/kbs", headers=acme.headers).status_code == 401


def test_a_key_revoked_through_this_process_is_refused_at_once(tmp_path: Path) -> None:
    with TestClient(make_app(settings_for(tmp_path / "r.db", key_cache_s=3600))) as client:
        acme = tenant(client, "acme")
        assert client.get("/v1/kbs", headers=acme.headers).status_code == 200
        assert client.delete("/v1/admin/tenants/acme/keys/1", headers=ADMIN).status_code == 204
        assert client.get("/v1/kbs", headers=acme.headers).status_code == 401


def key(key_id: int) -> ApiKey:
    return ApiKey(key_id, 1, "cw_x", "tenant", None, (), 60, "", "2026-12-01")


def test_the_key_cache_remembers_verified_keys_only_and_for_its_seconds() -> None:
    now = [0.0]
    cache = KeyCache(5.0, clock=lambda: now[0])
    reads: list[str] = []

    def read(token: str) -> ApiKey | None:
        reads.append(token)
        return key(7) if token == "good" else None

    assert cache.lookup("good", read) == key(7) and cache.lookup("good", read) == key(7)
    assert cache.lookup("bad", read) is None and cache.lookup("bad", read) is None
    assert reads == ["good", "bad", "bad"]  # an unknown token is read every time
    now[0] = 5.0
    assert cache.get("good") is None  # its seconds are over
    assert cache.lookup("good", read) == key(7) and reads[-1] == "good"
    cache.forget(7)
    assert cache.get("good") is None
    assert KeyCache(0.0).lookup("good", read) == key(7) and KeyCache(0.0).get("good") is None


def test_the_door_reads_the_key_as_the_routes_do() -> None:
    assert bearer([(b"authorization", b"Bearer cw_abc")]) == "cw_abc"
    assert bearer([(b"authorization", b"bearer  cw_abc ")]) == "cw_abc"
    assert bearer([(b"x-api-key", b"cw_def")]) == "cw_def"
    assert bearer([(b"authorization", b"Basic dXNlcg==")]) is None
    assert bearer([]) is None
