"""Hostile or unlucky input on every store (SQLite, MySQL/MariaDB, PostgreSQL), and what
public callers may learn: feedback tokens instead of global query ids, a widget key's
refusals without passages, concurrent creation of one name, NUL characters and lone
surrogates, and document headings shown as text in the console."""

from __future__ import annotations

import hashlib
import json
import re
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from streamlit.testing.v1 import AppTest

from citewise.answer.questions import check_question
from citewise.engine import Engine
from citewise.errors import (
    AlreadyExistsError,
    ConfigError,
    KnowledgeBaseError,
    QueryError,
    TenantExistsError,
)
from citewise.kb import check_name
from citewise.server import Settings
from citewise.stores.sqlite import open_sqlite
from citewise.tenancy import check_origin
from citewise.testing import config
from citewise.ui.console import esc
from tests.api_fixtures import ADMIN, ADMIN_KEY, COVERED, OUT_OF_SCOPE, kb_with_sample, make_app, tenant
from tests.servers import backends

STORES = backends("sqlite", "mysql", "pg")
ORIGIN = "https://shop.example.com"
CONSOLE = str(Path(__file__).resolve().parent.parent / "citewise" / "ui" / "console.py")


@pytest.fixture(params=STORES)
def any_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[object]:
    if request.param == "sqlite":
        store = open_sqlite(tmp_path / "hostile.db")
        yield store
        store.close()
    else:
        yield request.getfixturevalue(f"{request.param}_store")


@pytest.fixture(params=STORES)
def app_client(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[TestClient]:
    """The HTTP service on each store; server errors come back as 500s, not exceptions."""
    def client(db: str) -> TestClient:
        # a tenant's queue wide enough for the six racing creates (a seventh would get 429)
        settings = Settings(db=db, admin_key=ADMIN_KEY, embedder="hashing:256", tenant_queue=8)
        return TestClient(make_app(settings), raise_server_exceptions=False)

    if request.param == "sqlite":
        with client(str(tmp_path / "api.db")) as c:
            yield c
        return
    with request.getfixturevalue(f"{request.param}_database")() as url, client(url) as c:
        yield c


@pytest.fixture
def sqlite_client(tmp_path: Path) -> Iterator[TestClient]:
    settings = Settings(db=str(tmp_path / "api.db"), admin_key=ADMIN_KEY, embedder="hashing:256")
    with TestClient(make_app(settings)) as c:
        yield c


def post(client: TestClient, path: str, body: dict, headers: dict) -> object:
    """JSON with ``\\u`` escapes, so a lone surrogate travels as JSON allows."""
    return client.post(path, content=json.dumps(body),
                       headers={**headers, "Content-Type": "application/json"})


def strings(value: object) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from strings(v)


# -- 8: feedback needs the answer's token; query ids stay private -----------------------------

def test_feedback_takes_the_answers_token_once_and_query_ids_are_not_shown(
        sqlite_client: TestClient, tmp_path: Path) -> None:
    client = sqlite_client
    acme = tenant(client, "acme")
    kb_with_sample(client, acme)
    widget = tenant(client, "acme", kind="widget", kb="docs", origins=[ORIGIN])
    page = {**widget.headers, "Origin": ORIGIN}
    first = client.post("/v1/kbs/docs/ask", json={"question": COVERED}, headers=page).json()
    second = client.post("/v1/kbs/docs/ask", json={"question": COVERED}, headers=acme.headers).json()
    token = first["feedback_token"]
    assert first["query_id"] is None and second["query_id"] is None  # no global sequence
    assert len(token) >= 22 and token != second["feedback_token"]  # 128+ random bits

    def send(body: dict, headers: dict = page) -> object:
        return client.post("/v1/kbs/docs/feedback", json={"helpful": True, **body}, headers=headers)

    wrong = send({"feedback_token": token[:-2] + ("yy" if token.endswith("xx") else "xx"), "helpful": False})
    missing_kb = client.post("/v1/kbs/nowhere/feedback", headers=acme.headers,
                             json={"feedback_token": token, "helpful": False})
    assert wrong.status_code == missing_kb.status_code == 404
    assert "feedback token" in wrong.json()["detail"] and token not in wrong.text
    assert send({"feedback_token": "", "helpful": False}).status_code == 422
    r = send({"feedback_token": token, "comment": "right on"})
    assert r.status_code == 201 and r.json() == {"id": None, "query_id": None, "helpful": True}
    again = send({"feedback_token": token, "helpful": False, "comment": "overwritten"},
                 headers=acme.headers)
    assert again.status_code == 409 and "first one stays" in again.json()["detail"]
    store = open_sqlite(tmp_path / "api.db")
    try:
        kb = store.list_kbs(store.tenants.get_tenant("acme").id)[0]
        rows = store.query_log(kb)
        assert (rows[0].feedback, rows[0].feedback_note) == (True, "right on")
        assert rows[1].feedback is None
        kept = store.db.conn.execute("SELECT feedback_token FROM query_log ORDER BY id").fetchall()
        assert kept[0][0] == hashlib.sha256(token.encode()).hexdigest()  # only its hash
        assert token not in json.dumps([r.record for r in rows])
    finally:
        store.close()


def test_streamed_answers_carry_the_token_not_the_query_id(sqlite_client: TestClient) -> None:
    acme = tenant(sqlite_client, "acme")
    kb_with_sample(sqlite_client, acme)
    r = sqlite_client.post("/v1/kbs/docs/ask?stream=true", json={"question": COVERED},
                           headers=acme.headers)
    final = json.loads(r.text.strip().split("\n\n")[-1].split("\n", 1)[1].removeprefix("data: "))
    assert final["query_id"] is None and final["feedback_token"]
    r = sqlite_client.post("/v1/kbs/docs/feedback", headers=acme.headers,
                           json={"feedback_token": final["feedback_token"], "helpful": False})
    assert r.status_code == 201


# -- 9: a widget key's refusal lists headings and scores, not passages ------------------------

def test_a_widget_refusal_withholds_passages_on_every_path(sqlite_client: TestClient) -> None:
    client = sqlite_client
    acme = tenant(client, "acme")
    kb_with_sample(client, acme)
    widget = tenant(client, "acme", kind="widget", kb="docs", origins=[ORIGIN])
    page = {**widget.headers, "Origin": ORIGIN}
    ask = {"question": OUT_OF_SCOPE}
    full = client.post("/v1/kbs/docs/ask", json=ask, headers=acme.headers).json()
    assert full["status"] == "refused" and all(c["text"] and c["chunk_id"] for c in full["chunks"])
    shown = client.post("/v1/kbs/docs/ask", json=ask, headers=page).json()
    assert shown["status"] == "refused" and shown["related"] == full["related"]
    assert [(c["section"], c["cosine"]) for c in shown["chunks"]] == \
        [(c["section"], c["cosine"]) for c in full["chunks"]]
    assert all(c["text"] is None and c["chunk_id"] is None for c in shown["chunks"])
    hidden = {c["text"] for c in full["chunks"]} | {c["chunk_id"] for c in full["chunks"]}

    r = client.post("/v1/kbs/docs/ask?stream=true", json=ask, headers=page)
    events = {b.split("\n", 1)[0]: json.loads(b.split("\n", 1)[1].removeprefix("data: "))
              for b in r.text.strip().split("\n\n")}
    assert set(events) == {"event: retrieved", "event: decision", "event: refusal"}
    assert events["event: retrieved"]["chunks"]
    assert events["event: refusal"]["chunks"] == shown["chunks"]
    for seen in (shown, events):
        assert not [s for s in strings(seen) if s in hidden or any(h in s for h in hidden)]
    # an answer still shows its passages to the widget, and they open
    answer = client.post("/v1/kbs/docs/ask", json={"question": COVERED}, headers=page).json()
    assert answer["status"] == "answered" and all(c["text"] for c in answer["chunks"])
    cited = answer["citations"][0]["chunk_id"]
    assert client.get(f"/v1/kbs/docs/passages/{cited}", headers=page).status_code == 200


# -- 11: concurrent creation of one name: one 201, the rest 409 -------------------------------

def test_concurrent_creates_of_one_name_give_one_201(app_client: TestClient) -> None:
    acme = tenant(app_client, "acme")
    names = [f"docs{n}" for n in range(6)]
    codes: dict[str, list[int]] = {name: [] for name in names}

    def create(name: str, start: threading.Barrier) -> None:
        start.wait()
        r = app_client.post("/v1/kbs", json={"name": name}, headers=acme.headers)
        codes[name].append(r.status_code)

    for name in names:  # six rounds of six requests at once: one round rarely meets the race
        start = threading.Barrier(6)
        threads = [threading.Thread(target=create, args=(name, start)) for _ in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert {name: sorted(c) for name, c in codes.items()} == {n: [201] + [409] * 5 for n in names}
    assert [k["name"] for k in app_client.get("/v1/kbs", headers=acme.headers).json()] == names
    assert app_client.post("/v1/kbs", json={"name": "docs0"}, headers=acme.headers).status_code == 409
    r = app_client.post("/v1/admin/tenants", json={"name": "acme"}, headers=ADMIN)
    assert r.status_code == 409


def test_duplicate_names_raise_typed_errors_on_every_store(any_store: object) -> None:
    store = any_store
    kb = store.create_kb("docs", config())
    with pytest.raises(AlreadyExistsError):
        store.create_kb("docs", config())
    tenants = store.tenants
    acme = tenants.create_tenant("acme")
    with pytest.raises(TenantExistsError):
        tenants.create_tenant("acme")
    theirs = store.create_kb("docs", config(), tenant=acme.id)  # the operator's name is no wall
    with pytest.raises(AlreadyExistsError):  # the tenant's name taken
        store.create_kb("docs", config(), tenant=acme.id)
    assert [k.id for k in store.list_kbs(acme.id)] == [theirs.id] != [kb.id]
    assert [k.id for k in store.list_kbs()] == [kb.id]


# -- 12: NUL characters and lone surrogates are a clear 422, on every store --------------------

BAD = ["a\x00b", "a\ud800b"]


@pytest.mark.parametrize("bad", BAD, ids=["nul", "surrogate"])
def test_unstorable_text_is_refused_by_the_library(bad: str) -> None:
    with pytest.raises(QueryError, match="cannot be stored"):
        check_question(f"what is {bad}?")
    for name in (bad, "docs\n"):
        with pytest.raises(ConfigError):
            check_name(name)
    with pytest.raises(ConfigError, match="cannot be stored"):
        check_origin(f"https://{bad}.example")


def test_unstorable_names_and_labels_on_every_store(any_store: object) -> None:
    store = any_store
    tenants = store.tenants
    acme = tenants.create_tenant("acme")
    kb = store.create_kb("kb", config())
    store.log_query(kb, {"question": "q?", "status": "answered"}, None, feedback_token="tok")
    for bad in BAD:
        with pytest.raises(KnowledgeBaseError, match="No knowledge base named"):
            store.get_kb(bad)
        with pytest.raises(ConfigError):
            store.create_kb(bad, config())
        with pytest.raises(ConfigError, match="cannot be stored"):
            tenants.create_key(acme, "tenant", None, (), 60, f"label {bad}")
        with pytest.raises(QueryError, match="cannot be stored"):
            store.add_token_feedback(kb, "tok", True, f"note {bad}")
        with pytest.raises(KnowledgeBaseError, match="No knowledge base named"):
            store.get_kb(bad, tenant=acme.id)
        assert store.chunk_by_id(kb, bad) is None and store.document_hash(kb, bad) is None
        assert store.delete_document(kb, bad) is False
    assert tenants.list_keys(acme) == [] and store.query_log(kb)[0].feedback is None


def test_unstorable_text_over_http_on_every_store(app_client: TestClient) -> None:
    client = app_client
    acme = tenant(client, "acme")
    assert client.post("/v1/kbs", json={"name": "docs"}, headers=acme.headers).status_code == 201
    asked = client.post("/v1/kbs/docs/ask", json={"question": "nicotine"}, headers=acme.headers)
    token = asked.json()["feedback_token"]
    # NUL only: a lone surrogate in a JSON body is refused by request validation itself
    for bad in BAD[:1]:
        for path, body in [("/v1/kbs/docs/ask", {"question": f"dose {bad}?"}),
                           ("/v1/kbs/docs/ask?stream=true", {"question": f"dose {bad}?"}),
                           ("/v1/kbs/docs/search", {"query": f"dose {bad}"}),
                           ("/v1/kbs/docs/feedback",
                            {"feedback_token": token, "helpful": True, "comment": bad})]:
            r = post(client, path, body, acme.headers)
            assert r.status_code == 422 and "cannot be stored" in r.json()["detail"], (path, r.text)
        for path, body in [("/v1/admin/tenants", {"name": bad}),
                           ("/v1/admin/tenants/acme/keys", {"label": bad}),
                           ("/v1/admin/tenants/acme/keys",
                            {"kind": "widget", "kb": "docs", "origins": [f"https://{bad}.x"]})]:
            r = post(client, path, body, ADMIN)
            assert r.status_code == 422, (path, r.text)
    for path in ["/v1/kbs/do%00cs", "/v1/kbs/docs/passages/ab%00cd", "/v1/admin/tenants/ac%00me/keys"]:
        r = client.get(path, headers=ADMIN if "admin" in path else acme.headers)
        assert r.status_code == 422, (path, r.text)  # before any store is asked
    r = client.delete("/v1/kbs/docs/documents/a%00b.md", headers=acme.headers)
    assert r.status_code == 422
    r = client.post("/v1/kbs/docs/feedback", headers=acme.headers,
                    json={"feedback_token": token, "helpful": True, "comment": "fine"})
    assert r.status_code == 201  # nothing above was stored


# -- 13: the console shows titles and headings as text ----------------------------------------

HOSTILE_DOC = """# ![pixel](http://127.0.0.1:9/title.png) Nicotine <b>patch</b>

## [open me](http://127.0.0.1:9/heading) Dosing :red[now]

Apply one patch a day; the dose is <img src=x onerror=alert(1)> 21 mg for heavy smokers.
"""
UNESCAPED = re.compile(r"(?<!\\)!\\?\[|(?<!\\)\]\(|(?<!\\)<(b|img)")


def test_the_console_shows_titles_headings_and_text_as_text(tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "patch.md").write_text(HOSTILE_DOC, encoding="utf-8")
    path = tmp_path / "console.db"
    store = open_sqlite(path)
    engine = Engine(store)
    kb = engine.open_kb("hostile", embedder="hashing:256")
    engine.ingest(kb, [folder])
    chunk_id = next(iter(store.chunks(kb, [int(k) for k in store.dense_index(kb).keys]).values())).id
    store.close()
    monkeypatch.setenv("CITEWISE_DB", str(path))
    at = AppTest.from_file(CONSOLE, default_timeout=60)
    at.session_state["open-passage"] = ("hostile", chunk_id, 1)  # as its source's button does
    page = at.run()
    assert not page.exception
    shown = [e.value for e in [*page.header, *page.subheader, *page.caption, *page.info, *page.markdown]]
    (dialog,) = page.get("dialog")
    assert dialog.proto.dialog.title == "[1] " + esc(
        "![pixel](http://127.0.0.1:9/title.png) Nicotine <b>patch</b>")
    assert "Dosing" in page.subheader[0].value and "21 mg" in page.info[0].value
    assert not [s for s in shown if UNESCAPED.search(s)], shown
