"""Hostile requests (issue 13, items 5, 6 and 10): bodies too big for their route are refused
before anything reads them, the upload route checks the key before it reads its body, upload
file names and JSON strings that no store can hold are a clean 422, and no answer echoes the
request or names a server path.

The body tests run ``citewise serve`` in a process of its own with ``TMPDIR`` pointed at an
empty folder, and speak raw HTTP to it: a client that stops sending gets its answer only if the
server answered without waiting for the rest of the body."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from fastapi.testclient import TestClient

from citewise.engine import Engine
from citewise.errors import QueryError
from citewise.server import Settings
from tests.api_fixtures import ADMIN, ADMIN_KEY, make_app, settings_for, tenant
from tests.live import free_port, stop
from tests.servers import backends

ROOT = Path(__file__).resolve().parent.parent
MAX_UPLOAD, MAX_FILES, MAX_JSON = 20_000, 2, 64 * 1024
UPLOAD_LIMIT = MAX_FILES * (MAX_UPLOAD + 16 * 1024) + 64 * 1024  # citewise/api/limits.py
ANSWER_WITHIN = 30.0  # seconds; a server waiting for the rest of a body never answers
B = b"hostileBoundary"
MULTIPART = f"multipart/form-data; boundary={B.decode()}"
GOOD = b"# Guide\n\n## Part\n\nNicotine gum helps with cravings.\n"
# pypdf 7 raises AttributeError (not one of its own errors) on this damaged PDF
CRASHING_PDF = (
    b"%PDF-1.3\n%\xe2\xe3\xcf\xd3\n1 0 obj\n<<\n/Producer (pypdf)\n/Title (t)\n>>\nendobj\n"
    b"2 0 obj\n<<\n/Type /Pages\n/Count 1\n/Kids [ 4 0 R ]\n>>\nendobj\n3 0 obj\n<<\n"
    b"/Type /Catalog\n/Pages 2 0 R\n>>\nendobj\n4 0 obj\n<<\n/Type /Page\n/Resources <<\n>>\n"
    b"/MediaBox [ 0.0 0.0 100 100 ]\n/Parent 2 0 R\n>>\nendobj\nxref\n0 5\n0000000000 65535 f \n"
    b"0000000015 00'00 n \n0000000065 00000 n \n0000000124 00000 n \n0000000173 00000 n \n"
    b"trailer8<<\n/Size 5\n/Root 3 0 R\n/Info 1 0 R\n>>\nstartxref\n267\n%%EOF\n"
)


def part(filename: bytes, data: bytes) -> bytes:
    return (b"--" + B + b'\r\nContent-Disposition: form-data; name="files"; filename="' + filename
            + b'"\r\nContent-Type: application/octet-stream\r\n\r\n' + data + b"\r\n")


def multipart(*files: tuple[bytes, bytes]) -> bytes:
    return b"".join(part(name, data) for name, data in files) + b"--" + B + b"--\r\n"


# -- a real server, raw HTTP ----------------------------------------------------------------

@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict]:
    """``citewise serve`` with small limits and an empty TMPDIR; a tenant key and a kb."""
    work = tmp_path_factory.mktemp("hostile")
    tmpdir = work / "tmp"
    tmpdir.mkdir()
    port = free_port()
    env = {**os.environ, "CITEWISE_ADMIN_KEY": ADMIN_KEY, "CITEWISE_EMBEDDER": "hashing:256",
           "CITEWISE_MAX_UPLOAD_BYTES": str(MAX_UPLOAD), "CITEWISE_MAX_FILES": str(MAX_FILES),
           "CITEWISE_MAX_BODY_BYTES": str(MAX_JSON), "TMPDIR": str(tmpdir), "PYTHONPATH": str(ROOT)}
    log = (work / "serve.log").open("w")
    proc = subprocess.Popen(
        [sys.executable, "-m", "citewise", "--db", str(work / "s.db"), "serve", "--port",
         str(port), "--log-level", "warning"], cwd=work, env=env, stdout=log, stderr=subprocess.STDOUT)
    client = httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=60)
    try:
        deadline = time.monotonic() + 90
        while True:
            assert proc.poll() is None, (work / "serve.log").read_text()
            try:
                if client.get("/healthz", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                assert time.monotonic() < deadline, "citewise serve did not start"
                time.sleep(0.2)
        assert client.post("/v1/admin/tenants", json={"name": "acme"}, headers=ADMIN).status_code == 201
        key = client.post("/v1/admin/tenants/acme/keys", json={}, headers=ADMIN).json()["key"]
        auth = {"Authorization": f"Bearer {key}"}
        assert client.post("/v1/kbs", json={"name": "docs"}, headers=auth).status_code == 201
        yield {"port": port, "auth": f"Authorization: Bearer {key}\r\n", "tmpdir": tmpdir,
               "client": client}
    finally:
        client.close()
        stop(proc)
        log.close()


def exchange(port: int, head: str, body: bytes) -> tuple[int, dict, float]:
    """Send ``head`` and ``body`` (not the rest of the body the head announces), then read the
    answer: (status, its JSON body, seconds until it came). Fails if no answer comes."""
    with socket.create_connection(("127.0.0.1", port), timeout=ANSWER_WITHIN) as sock:
        started = time.monotonic()
        sock.sendall(head.encode() + b"\r\n" + body)
        data = b""
        while b"\r\n\r\n" not in data or len(data.partition(b"\r\n\r\n")[2]) < _length(data):
            try:
                block = sock.recv(65536)
            except TimeoutError:
                pytest.fail(f"no answer within {ANSWER_WITHIN:.0f} s: the server waits for the body")
            except ConnectionResetError:  # closed with our unread bytes; what came is the answer
                break
            if not block:
                break
            data += block
    head_out, _, content = data.partition(b"\r\n\r\n")
    status = int(head_out.split()[1])
    return status, json.loads(content[: _length(data)]), time.monotonic() - started


def _length(data: bytes) -> int:
    for line in data.partition(b"\r\n\r\n")[0].split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            return int(line.split(b":")[1])
    return 1 << 30


def post_head(path: str, content_type: str, length: int | None, auth: str = "") -> str:
    size = f"Content-Length: {length}" if length is not None else "Transfer-Encoding: chunked"
    return (f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: {content_type}\r\n"
            f"{auth}{size}\r\n")


def chunked(data: bytes, size: int = 16 * 1024) -> bytes:
    """``data`` as chunks of a chunked body, without the closing empty chunk."""
    return b"".join(b"%x\r\n%s\r\n" % (len(data[i:i + size]), data[i:i + size])
                    for i in range(0, len(data), size))


@pytest.mark.heavy
def test_a_declared_oversized_body_gets_413_unread_with_or_without_a_key(server: dict) -> None:
    port, auth = server["port"], server["auth"]
    for who in ("", auth):
        status, body, _ = exchange(port, post_head("/v1/kbs/docs/documents?wait=true", MULTIPART,
                                                   300_000_000, who), part(b"big.txt", b"x" * 1000))
        assert status == 413 and f"limit of {UPLOAD_LIMIT:,} bytes" in body["detail"]
        status, body, _ = exchange(port, post_head("/v1/kbs/docs/ask", "application/json",
                                                   200_000_000, who), b'{"question": "')
        assert status == 413 and f"limit of {MAX_JSON:,} bytes" in body["detail"]
    assert list(server["tmpdir"].iterdir()) == []


def test_the_upload_route_checks_the_key_before_it_reads_the_body(server: dict) -> None:
    """A body under the limit, announced but not sent: no key or a wrong key is a 401 at once."""
    port = server["port"]
    first = part(b"guide.md", GOOD)
    for who in ("", "Authorization: Bearer cw_not-a-key\r\n"):
        status, body, _ = exchange(port, post_head("/v1/kbs/docs/documents?wait=true", MULTIPART,
                                                   UPLOAD_LIMIT - 1000, who), first)
        assert status == 401 and "key" in body["detail"]
    assert list(server["tmpdir"].iterdir()) == []


def test_a_chunked_body_is_refused_when_it_passes_the_limit(server: dict) -> None:
    """No length to check up front: the body is counted as it is read, and the answer is a 413
    before the client has finished sending (the closing chunk is never sent)."""
    port, auth = server["port"], server["auth"]
    upload = part(b"big.txt", b"word " * (UPLOAD_LIMIT // 4))
    status, body, _ = exchange(port, post_head("/v1/kbs/docs/documents?wait=true", MULTIPART, None, auth),
                               chunked(upload))
    assert status == 413 and f"limit of {UPLOAD_LIMIT:,} bytes" in body["detail"]
    question = b'{"question": "' + b"why " * MAX_JSON
    status, body, _ = exchange(port, post_head("/v1/kbs/docs/ask", "application/json", None, auth),
                               chunked(question))
    assert status == 413 and f"limit of {MAX_JSON:,} bytes" in body["detail"]
    assert list(server["tmpdir"].iterdir()) == []
    # the service goes on: a small chunked upload is stored
    body = multipart((b"guide.md", GOOD))
    status, result, _ = exchange(port, post_head("/v1/kbs/docs/documents?wait=true", MULTIPART, None, auth),
                                 chunked(body) + b"0\r\n\r\n")
    assert status == 200 and result["files"][0]["status"] == "added"


# -- uploads: names, parser crashes, paths ---------------------------------------------------

@pytest.fixture(name="docs")
def docs_fixture(tmp_path: Path) -> Iterator[tuple[TestClient, dict]]:
    with TestClient(make_app(settings_for(tmp_path / "u.db"))) as client:
        acme = tenant(client, "acme")
        assert client.post("/v1/kbs", json={"name": "docs"}, headers=acme.headers).status_code == 201
        yield client, acme.headers


def send(client: TestClient, headers: dict, *files: tuple[bytes, bytes]) -> httpx.Response:
    return client.post("/v1/kbs/docs/documents?wait=true", content=multipart(*files),
                       headers={**headers, "Content-Type": MULTIPART})


def stored(client: TestClient, headers: dict) -> list[str]:
    return [d["doc_id"] for d in client.get("/v1/kbs/docs/documents", headers=headers).json()]


def test_file_names_with_control_characters_or_folders_are_rejected(docs) -> None:
    client, headers = docs
    reasons = {
        b"a\x00b.txt": "control character", b"tab\there.txt": "control character",
        b"\x1b[31mred.md": "control character", b"dir/guide.md": "holds a folder",
        b"../guide.md": "holds a folder", b"a\\\\guide.md": "holds a folder",
    }
    for name, reason in reasons.items():
        r = send(client, headers, (name, GOOD))
        assert r.status_code == 422, (name, r.text)
        [line] = r.json()["files"]
        assert line["status"] == "rejected" and reason in line["reason"], (name, line)
    assert stored(client, headers) == []


def test_a_parser_crash_is_a_result_line_and_the_good_file_beside_it_is_stored(docs) -> None:
    """Each file is reported and stored whole or not at all (the route's docstring says so)."""
    client, headers = docs
    r = send(client, headers, (b"good.txt", GOOD), (b"bad.pdf", CRASHING_PDF))
    assert r.status_code == 200, r.text
    good, bad = r.json()["files"]
    assert good["status"] == "added" and good["doc_id"] == "good.txt"
    assert (bad["filename"], bad["doc_id"], bad["status"]) == ("bad.pdf", None, "rejected")
    assert bad["reason"].startswith("not a readable PDF"), bad
    assert stored(client, headers) == ["good.txt"]
    r = send(client, headers, (b"bad.pdf", CRASHING_PDF))
    assert r.status_code == 422 and r.json()["files"][0]["status"] == "rejected"


@pytest.mark.heavy
def test_no_rejection_names_a_server_path(docs) -> None:
    client, headers = docs
    temp = tempfile.gettempdir()
    for files in ([(b"a\\\\empty.md", b"")], [(b"empty.md", b"")], [(b"x.pdf", b"%PDF-1.4 no")],
                  [(b"bin.txt", b"\x00\x01")], [(b"big.md", b"w" * (10 * 1024 * 1024 + 1))],
                  [(b"x.xlsx", b"PK")]):
        r = send(client, headers, *files)
        expected = {b"big.md": 413, b"x.xlsx": 415}.get(files[0][0], 422)
        assert r.status_code == expected, r.text
        assert temp not in r.text and "citewise-upload" not in r.text, r.text


# -- JSON strings and 422 bodies -------------------------------------------------------------

@pytest.fixture(params=backends("sqlite", "mysql", "pg"))
def any_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[TestClient]:
    if request.param == "sqlite":
        with TestClient(make_app(settings_for(tmp_path / "j.db"))) as client:
            yield client
        return
    with request.getfixturevalue(f"{request.param}_database")() as url:
        settings = Settings(db=url, admin_key=ADMIN_KEY, embedder="hashing:256")  # type: ignore[arg-type]
        with TestClient(make_app(settings)) as client:
            yield client


def test_nul_and_lone_surrogates_in_any_json_string_are_a_422_on_every_store(any_store) -> None:
    client = any_store
    acme = tenant(client, "acme")
    assert client.post("/v1/kbs", json={"name": "docs"}, headers=acme.headers).status_code == 201
    widget = {"kind": "widget", "kb": "docs", "origins": ["https://a.example"]}
    cases = [
        ("/v1/admin/tenants", ADMIN, "name", lambda x: {"name": x}),
        ("/v1/admin/tenants/acme/keys", ADMIN, "label", lambda x: {"label": x}),
        ("/v1/admin/tenants/acme/keys", ADMIN, "kb", lambda x: {**widget, "kb": x}),
        ("/v1/admin/tenants/acme/keys", ADMIN, "origins", lambda x: {**widget, "origins": [x]}),
        ("/v1/kbs", acme.headers, "name", lambda x: {"name": x}),
        ("/v1/kbs", acme.headers, "embedder", lambda x: {"name": "k2", "embedder": x}),
        ("/v1/kbs/docs/ask", acme.headers, "question", lambda x: {"question": x}),
        ("/v1/kbs/docs/search", acme.headers, "query", lambda x: {"query": x}),
        ("/v1/kbs/docs/feedback", acme.headers, "comment",
         lambda x: {"feedback_token": "t" * 32, "helpful": True, "comment": x}),
    ]
    for path, headers, field, body in cases:
        for bad in ("a\x00b", "a\ud800b", "\udfff"):
            raw = json.dumps(body(bad)).encode()  # ASCII, the surrogate as \ud800
            r = client.post(path, content=raw, headers={**headers, "Content-Type": "application/json"})
            assert r.status_code == 422, (path, field, bad, r.text)
            assert r.json()["detail"].startswith(f"{field}: "), (path, field, r.text)
    assert [t["name"] for t in client.get("/v1/admin/tenants", headers=ADMIN).json()] == ["acme"]


def test_nul_and_control_characters_in_a_path_are_a_422_on_every_store(any_store) -> None:
    """Before the store sees them: PostgreSQL refused NUL with a 503 naming the database."""
    client = any_store
    acme = tenant(client, "acme")
    assert client.post("/v1/kbs", json={"name": "docs"}, headers=acme.headers).status_code == 201
    for method, path, headers, field in [
        ("GET", "/v1/kbs/a%00b", acme.headers, "kb"),
        ("GET", "/v1/kbs/docs/passages/a%00b", acme.headers, "chunk_id"),
        ("DELETE", "/v1/kbs/docs/documents/a%1Fb", acme.headers, "doc_id"),
        ("GET", "/v1/admin/tenants/a%00b/keys", ADMIN, "tenant"),
        ("DELETE", "/v1/admin/tenants/a%00b/keys/1", ADMIN, "tenant"),
    ]:
        r = client.request(method, path, headers=headers)
        assert r.status_code == 422, (path, r.text)
        assert r.json()["detail"] in (f"{field}: holds a NUL character",
                                      f"{field}: holds a control character"), r.text


def test_a_422_never_echoes_the_request(docs) -> None:
    client, headers = docs
    pad = "secret-" * 8_000
    r = client.post("/v1/kbs/docs/ask", json={"question": 5, "pad": pad}, headers=headers)
    assert r.status_code == 422
    assert r.json() == {"detail": "question: Input should be a valid string; "
                                  "pad: Extra inputs are not permitted"}
    many = {"question": "why", **{f"x{i}": pad[:100] for i in range(200)}}
    r = client.post("/v1/kbs/docs/ask", json=many, headers=headers)
    assert r.status_code == 422 and len(r.json()["detail"]) <= 500 and "secret" not in r.text
    r = client.post("/v1/kbs/docs/ask", content=b'{"question": "\\ud800"}',
                    headers={**headers, "Content-Type": "application/json"})
    assert r.status_code == 422 and r.json()["detail"].startswith("question: ")


def test_check_question_refuses_nul_and_lone_surrogates_for_library_callers(engine: Engine) -> None:
    kb = engine.open_kb("s", embedder="hashing:64")
    for bad in ("why\x00 not", "why \ud83d"):
        with pytest.raises(QueryError, match="holds a (NUL character|lone surrogate)"):
            engine.ask(kb, bad)


def test_an_unavailable_store_is_a_503_that_names_no_url_or_password(tmp_path: Path) -> None:
    """The driver's message names the store's URL (host, port, user, password): logged only."""
    url = "mysql://citewise:s3cret-pw@127.0.0.1:1/hidden_db"
    app = make_app(settings_for(tmp_path / "unused.db").model_copy(update={"db": url}))
    with TestClient(app) as c:
        for r in (c.get("/readyz"), c.get("/v1/kbs", headers={"Authorization": "Bearer cw_x"})):
            assert r.status_code == 503
            assert r.json() == {"detail": "the store is unavailable; try again later"}
            for secret in ("s3cret", "hidden_db", "127.0.0.1", "citewise@", ":1/"):
                assert secret not in r.text


def test_an_out_of_range_key_id_is_a_422_not_a_500(tmp_path: Path) -> None:
    """Schemathesis found it: 2**63 overflowed SQLite's integer in revoke_key."""
    with TestClient(make_app(settings_for(tmp_path / "api.db"))) as client:
        tenant(client, "acme")
        r = client.delete("/v1/admin/tenants/acme/keys/9223372036854775808", headers=ADMIN)
        assert r.status_code == 422
