"""Bad input is a clear 4xx naming the problem, and nothing stored is lost."""

from __future__ import annotations

from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from citewise.api.kbs import upload_status
from citewise.api.problems import status_of
from citewise.errors import DocumentError, UnsupportedTypeError, UploadTooLargeError
from citewise.ingest.documents import load
from tests.api_fixtures import (
    ADMIN,
    COVERED,
    kb_with_sample,
    make_app,
    settings_for,
    tenant,
    upload,
)

GOOD = b"# Guide\n\n## Part\n\nNicotine gum helps with cravings.\n"


def small_limit_client(tmp_path: Path) -> TestClient:
    return TestClient(make_app(settings_for(tmp_path / "in.db", max_upload_bytes=2000, max_files=3)))


def test_bad_uploads_are_rejected_per_file_and_nothing_stored_is_lost(tmp_path: Path) -> None:
    with small_limit_client(tmp_path) as client:
        acme = tenant(client, "acme")
        client.post("/v1/kbs", json={"name": "docs"}, headers=acme.headers)
        assert upload(client, acme, "docs", {"guide.md": GOOD})["files"][0]["status"] == "added"
        before = client.get("/v1/kbs/docs/documents", headers=acme.headers).json()

        cases = {
            "big.md": (b"# Big\n\n" + b"word " * 1000, 413, "over the upload limit of 2,000 bytes"),
            "sheet.xlsx": (b"PK\x03\x04", 415, "unsupported file type .xlsx"),
            "broken.pdf": (b"%PDF-1.4 not really", 422, "not a readable PDF"),
            "latin1.txt": ("caf\u00e9 cr\u00e8me".encode("latin-1"), 422, "not UTF-8"),
            "empty.md": (b"", 422, "empty file"),
            "guide.md": (b"# Guide\n\n\xff\xfe broken", 422, "not UTF-8"),
        }
        for name, (data, status, reason) in cases.items():
            r = upload(client, acme, "docs", {name: data})
            assert r["status"] == status, (name, r)
            assert r["files"][0]["status"] == "rejected" and reason in r["files"][0]["reason"], r
            assert "citewise-upload" not in r["files"][0]["reason"]  # no temp paths leak

        mixed = upload(client, acme, "docs", {"new.md": GOOD.replace(b"gum", b"patch"),
                                              "sheet.xlsx": b"PK"})
        assert mixed["status"] == 200
        assert [f["status"] for f in mixed["files"]] == ["added", "rejected"]
        after = client.get("/v1/kbs/docs/documents", headers=acme.headers).json()
        assert [d for d in after if d["doc_id"] == "guide.md"] == before
        assert [d["doc_id"] for d in after] == ["guide.md", "new.md"]

        r = upload(client, acme, "docs", {f"f{i}.md": GOOD for i in range(4)})
        assert r["status"] == 422 and "Maximum number of files is 3" in r["detail"]


def test_questions_and_fields_are_checked(tmp_path: Path) -> None:
    with TestClient(make_app(settings_for(tmp_path / "q.db"))) as client:
        acme = tenant(client, "acme")
        kb_with_sample(client, acme)
        ask = "/v1/kbs/docs/ask"
        r = client.post(ask, json={"question": "   "}, headers=acme.headers)
        assert r.status_code == 422 and r.json()["detail"] == "The question is empty; ask something in words."
        r = client.post(ask, json={"question": "why " * 2500}, headers=acme.headers)
        assert r.status_code == 422 and "is 9,999 characters; the limit is 2,000" in r.json()["detail"]
        r = client.post(ask, json={"question": COVERED, "temperature": 0.5}, headers=acme.headers)
        assert r.status_code == 422
        assert r.json()["detail"] == "temperature: Extra inputs are not permitted"
        r = client.post(ask, json={}, headers=acme.headers)
        assert r.status_code == 422 and r.json()["detail"] == "question: Field required"
        as_json = {**acme.headers, "Content-Type": "application/json"}
        r = client.post(ask, content=b"not json", headers=as_json)
        assert r.status_code == 422
        r = client.post("/v1/kbs", json={"name": "../etc"}, headers=acme.headers)
        assert r.status_code == 422 and "Invalid knowledge base name" in r.json()["detail"]
        r = client.post("/v1/kbs", json={"name": "x", "embedder": "nope:1"}, headers=acme.headers)
        # the message lists what the operator allows (settings), not every registered embedder
        assert r.status_code == 422 and r.json()["detail"].endswith("Allowed embedders: hashing:256.")
        assert client.post("/v1/kbs", json={"name": "docs"}, headers=acme.headers).status_code == 409
        r = client.post("/v1/admin/tenants", json={"name": "a", "plan": "gold"}, headers=ADMIN)
        assert r.status_code == 422
        # nothing was lost: the knowledge base still answers
        r = client.post(ask, json={"question": COVERED}, headers=acme.headers)
        assert r.json()["status"] == "answered"


def test_upload_statuses_come_from_the_error_kinds_not_their_words(tmp_path: Path) -> None:
    """413 / 415 / 422 for an upload whose files were all rejected are chosen by the errors'
    kinds in the one status table, whatever their messages say."""
    too_big = UploadTooLargeError("over the upload limit of 2,000 bytes")
    odd_type = UnsupportedTypeError("over the upload limit, says its message")
    assert status_of(too_big) == 413 and status_of(odd_type) == 415
    assert upload_status([odd_type]) == 415
    assert upload_status([odd_type, DocumentError("unsupported file type .x")]) == 422
    assert upload_status([odd_type, too_big]) == 413
    assert upload_status([too_big, None]) == 200  # one file stored
    (tmp_path / "sheet.xlsx").write_bytes(b"PK\x03\x04")
    with pytest.raises(UnsupportedTypeError, match="unsupported file type .xlsx"):
        load(tmp_path / "sheet.xlsx")  # the loader's own refusal has the kind too
