"""One error shape everywhere: every error the service answers, whatever raised it (a
citewise error, validation, an unknown route or method, a body that is not JSON, a bug), is
``{"detail": "<one message>"}`` (an upload's or URL list's report adds its per-item results
beside the ``detail``), and the OpenAPI schema describes each one so."""

from __future__ import annotations

from pathlib import Path

from fastapi.testclient import TestClient

from tests.api_fixtures import make_app, settings_for, tenant


def test_every_error_is_one_detail_string(tmp_path: Path) -> None:
    app = make_app(settings_for(tmp_path / "e.db"))

    @app.get("/v1/boom")
    def boom() -> None:
        raise RuntimeError("a secret of the server's internals")

    with TestClient(app, raise_server_exceptions=False) as client:
        acme = tenant(client, "acme")
        json = {**acme.headers, "Content-Type": "application/json"}
        client.post("/v1/kbs", json={"name": "docs"}, headers=acme.headers)
        upload = client.post("/v1/kbs/docs/documents?wait=true", headers=acme.headers,
                             files=[("files", ("a.exe", b"MZ"))])
        answers = {
            "unknown route": client.get("/v1/nowhere", headers=acme.headers),
            "wrong method": client.delete("/healthz"),
            "no key": client.get("/v1/kbs"),
            "missing field": client.post("/v1/kbs", json={"nam": "x"}, headers=acme.headers),
            "not JSON": client.post("/v1/kbs", content=b"{nope", headers=json),
            "no such kb": client.get("/v1/kbs/none", headers=acme.headers),
            "a bug": client.get("/v1/boom"),
        }
    for what, r in answers.items():
        assert r.status_code >= 400 and r.headers["content-type"] == "application/json", what
        body = r.json()
        assert list(body) == ["detail"] and isinstance(body["detail"], str), (what, body)
    assert answers["not JSON"].json()["detail"].startswith("body: not valid JSON at character 1")
    assert answers["missing field"].json()["detail"] == (
        "name: Field required; nam: Extra inputs are not permitted")
    assert answers["a bug"].status_code == 500 and "secret" not in answers["a bug"].text
    assert upload.status_code == 415 and upload.json()["files"][0]["status"] == "rejected"
    assert upload.json()["detail"] == "Nothing was stored: a.exe: unsupported file type .exe; " \
        "supported: .docx, .htm, .html, .markdown, .md, .pdf, .text, .txt"


def test_the_schema_gives_every_error_a_detail(tmp_path: Path) -> None:
    """Every error status of every operation is a ``Problem``, or (an upload's or a URL list's
    per-item report) a body that has the same ``detail`` string beside its items."""
    schema = make_app(settings_for(tmp_path / "s.db")).openapi()
    models = schema["components"]["schemas"]
    assert "HTTPValidationError" not in models and list(models["Problem"]["required"]) == ["detail"]
    for path, operations in schema["paths"].items():
        for method, operation in operations.items():
            for code, response in operation["responses"].items():
                if int(code) < 400:
                    continue
                shape = response["content"]["application/json"]["schema"]
                for ref in [s["$ref"] for s in shape.get("anyOf", [shape])]:
                    detail = models[ref.rsplit("/", 1)[1]]["properties"]["detail"]
                    assert "string" in str(detail), (method, path, code)
