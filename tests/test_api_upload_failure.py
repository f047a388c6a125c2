"""A synchronous upload (``?wait=true``) that meets a failure of the store part way: the
answer is a 503 that says which files were stored and which were not, and names nothing of
the store."""

from __future__ import annotations

from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from citewise.errors import StoreError
from citewise.stores.sql import SQLStore
from tests.api_fixtures import make_app, settings_for, tenant

FILES = {"a.md": b"# A\n\nAlpha grows by the river.\n", "bad.exe": b"MZ",
         "b.md": b"# B\n\nBeta sleeps in the barn.\n", "c.md": b"# C\n\nGamma sings at dawn.\n"}


def test_an_upload_that_loses_the_store_part_way_says_which_files_were_stored(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with TestClient(make_app(settings_for(tmp_path / "u.db"))) as client:
        acme = tenant(client, "acme")
        assert client.post("/v1/kbs", json={"name": "docs"}, headers=acme.headers).status_code == 201
        put = SQLStore.put_document
        calls: list[str] = []

        def second_fails(self: SQLStore, kb: object, doc: object, *args: object, **kw: object):
            calls.append(doc.id)  # type: ignore[attr-defined]
            if len(calls) > 1:  # what the driver says names the server: never shown
                raise StoreError("mysql://cw:s3cret@db.internal:3306/t: write failed: gone away")
            return put(self, kb, doc, *args, **kw)  # type: ignore[arg-type]

        monkeypatch.setattr(SQLStore, "put_document", second_fails)
        r = client.post("/v1/kbs/docs/documents?wait=true", headers=acme.headers,
                        files=[("files", (name, data)) for name, data in FILES.items()])
        assert r.status_code == 503
        body = r.json()
        assert [(f["filename"], f["status"]) for f in body["files"]] == [
            ("a.md", "added"), ("bad.exe", "rejected")]
        assert body["detail"] == ("the store is unavailable; try again later. Stored: a.md. "
                                  "Not stored (upload them again): b.md, c.md.")
        for secret in ("s3cret", "db.internal", "gone away"):
            assert secret not in r.text
        monkeypatch.setattr(SQLStore, "put_document", put)
        docs = client.get("/v1/kbs/docs/documents", headers=acme.headers).json()
        assert [d["doc_id"] for d in docs] == ["a.md"]
