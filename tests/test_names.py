"""Names read as people read them (issue 28): a document name is kept in one Unicode form
(NFC: "é" as one character or as "e" and an accent is one name), a name holding a
bidirectional control character (which shows "a<RLO>gpj.md" as "agpj.md" reversed) is refused,
and the messages about names and empty files say what is true."""

from __future__ import annotations

import unicodedata
from pathlib import Path

from fastapi.testclient import TestClient
from typer.testing import CliRunner

from citewise.cli import app as cli_app
from citewise.errors import DocumentError
from citewise.ingest.documents import load
from citewise.ingest.uploaded import check_filename
from tests.api_fixtures import make_app, settings_for, tenant, upload

ONE = "caf\u00e9.md"  # é as one character (NFC)
TWO = "cafe\u0301.md"  # e + combining acute (NFD): looks the same
TEXT = b"# Cafe\n\nThe espresso machine is cleaned every evening.\n"


def documents(client: TestClient, headers: dict[str, str]) -> list[str]:
    return [d["doc_id"] for d in client.get("/v1/kbs/docs/documents", headers=headers).json()]


def test_two_spellings_of_one_name_are_one_document(tmp_path: Path) -> None:
    with TestClient(make_app(settings_for(tmp_path / "s.db"))) as client:
        acme = tenant(client, "acme")
        assert client.post("/v1/kbs", json={"name": "docs"}, headers=acme.headers).status_code == 201
        first = upload(client, acme, "docs", {ONE: TEXT})["files"][0]
        second = upload(client, acme, "docs", {TWO: TEXT + b"\nAnd descaled weekly.\n"})["files"][0]
        assert first["doc_id"] == second["doc_id"] == ONE, (first, second)
        assert second["status"] == "replaced"
        assert documents(client, acme.headers) == [ONE]
        # in one request, the two are one name sent twice
        r = upload(client, acme, "docs", {ONE: TEXT, TWO: TEXT})
        assert r["status"] == 422 and "same name" in r["detail"], r
        # and either spelling finds it
        r = client.delete(f"/v1/kbs/docs/documents/{TWO}", headers=acme.headers)
        assert r.status_code == 204 and documents(client, acme.headers) == []


def test_a_name_with_a_bidirectional_control_is_refused(tmp_path: Path) -> None:
    with TestClient(make_app(settings_for(tmp_path / "s.db"))) as client:
        acme = tenant(client, "acme")
        assert client.post("/v1/kbs", json={"name": "docs"}, headers=acme.headers).status_code == 201
        for name in ("invoice\u202egpj.md", "a\u2066b.md", "x\u200f.md"):
            r = upload(client, acme, "docs", {name: TEXT})
            assert r["status"] == 422 and r["files"][0]["status"] == "rejected", r
            assert "bidirectional control character" in r["files"][0]["reason"], r
        assert documents(client, acme.headers) == []


def test_files_read_from_a_folder_get_nfc_ids_and_bidi_names_are_refused(tmp_path: Path) -> None:
    (tmp_path / TWO).write_bytes(TEXT)
    assert load(tmp_path / TWO, tmp_path).id == ONE
    (tmp_path / "evil\u202etxt.md").write_bytes(TEXT)
    try:
        load(tmp_path / "evil\u202etxt.md", tmp_path)
    except DocumentError as e:
        assert "bidirectional control character" in str(e)
    else:
        raise AssertionError("a name with a right-to-left override was loaded")
    assert check_filename(TWO) == unicodedata.normalize("NFC", TWO) == ONE


def test_a_tenants_knowledge_base_name_error_says_its_limit(tmp_path: Path) -> None:
    with TestClient(make_app(settings_for(tmp_path / "s.db"))) as client:
        acme = tenant(client, "acme")
        r = client.post("/v1/kbs", json={"name": "bad name!"}, headers=acme.headers)
    assert r.status_code == 422 and "1-48 letters" in r.json()["detail"], r.text
    assert "64" not in r.json()["detail"]
    # the operator's own (the CLI's) may have 64
    (tmp_path / "a.md").write_bytes(TEXT)
    r = CliRunner().invoke(cli_app, ["--db", str(tmp_path / "cli.db"), "ingest", "--kb", "bad name!",
                                     "--embedder", "hashing:64", "-q", str(tmp_path / "a.md")])
    assert r.exit_code == 1 and "1-64 letters" in str(r.exception), r.output


def test_a_markdown_file_of_headings_only_is_not_called_a_scanned_pdf(tmp_path: Path) -> None:
    with TestClient(make_app(settings_for(tmp_path / "s.db"))) as client:
        acme = tenant(client, "acme")
        assert client.post("/v1/kbs", json={"name": "docs"}, headers=acme.headers).status_code == 201
        r = upload(client, acme, "docs", {"outline.md": b"# Outline\n\n## Part one\n\n## Part two\n"})
    reason = r["files"][0]["reason"]
    assert r["status"] == 422 and "no text found" in reason and "PDF" not in reason, reason
    assert "headings" in reason
