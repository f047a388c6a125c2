"""The HTTP service end to end through FastAPI's TestClient, on the hashing embedder."""

from __future__ import annotations

import hashlib
import json
import sqlite3
from contextlib import closing
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from citewise.errors import ConfigError
from citewise.ingest.chunking import CHUNKERS
from citewise.search.retrieval import MODES
from citewise.server import Settings
from tests.api_fixtures import (
    ADMIN,
    COVERED,
    OUT_OF_SCOPE,
    kb_with_sample,
    make_app,
    settings_for,
    tenant,
)
from tests.helpers import SAMPLE


def test_the_service_will_not_start_without_an_admin_key(tmp_path) -> None:
    app = make_app(Settings(db=str(tmp_path / "x.db"), admin_key=None))
    with pytest.raises(ConfigError, match="set the environment variable CITEWISE_ADMIN_KEY"), \
            TestClient(app):
        pass


def test_health_ready_and_openapi(client: TestClient) -> None:
    assert client.get("/healthz").json() == {"status": "ok"}
    assert client.get("/readyz").json() == {"status": "ready"}
    paths = client.get("/openapi.json").json()["paths"]
    assert {"/v1/kbs/{kb}/ask", "/v1/kbs/{kb}/passages/{chunk_id}", "/v1/admin/tenants"} <= set(paths)


def test_a_tenant_creates_a_kb_uploads_asks_and_gives_feedback(client: TestClient) -> None:
    acme = tenant(client, "acme")
    kb_with_sample(client, acme)
    shown = client.get("/v1/kbs/docs", headers=acme.headers).json()
    assert shown["name"] == "docs" and shown["documents"] == 10 and shown["chunks"] > 50
    assert [k["name"] for k in client.get("/v1/kbs", headers=acme.headers).json()] == ["docs"]

    answer = client.post("/v1/kbs/docs/ask", json={"question": COVERED}, headers=acme.headers).json()
    assert answer["status"] == "answered" and answer["citations"] and answer["query_id"] is None
    cited = answer["citations"][0]
    passage = client.get(f"/v1/kbs/docs/passages/{cited['chunk_id']}", headers=acme.headers).json()
    assert passage["doc_id"] == cited["doc_id"] and passage["section"] == cited["section"]
    assert cited["quote"].split()[0] in passage["text"]

    refusal = client.post("/v1/kbs/docs/ask", json={"question": OUT_OF_SCOPE}, headers=acme.headers).json()
    assert refusal["status"] == "refused" and refusal["related"] and refusal["reason"]
    assert refusal["feedback_token"] != answer["feedback_token"]

    r = client.post("/v1/kbs/docs/feedback", headers=acme.headers,
                    json={"feedback_token": answer["feedback_token"], "helpful": True,
                          "comment": "clear"})
    assert r.status_code == 201 and r.json()["helpful"] is True

    found = client.post("/v1/kbs/docs/search", json={"query": "bupropion seizures", "k": 3},
                        headers=acme.headers).json()
    assert len(found["chunks"]) == 3 and {"cosine", "bm25", "rrf", "fused"} <= set(found["chunks"][0])
    assert [c["fused"] for c in found["chunks"]] == [c["rrf"] for c in found["chunks"]]
    assert all(c["rrf"] == c["fused"] for c in answer["chunks"] + refusal["chunks"])

    assert client.delete("/v1/kbs/docs/documents/bupropion.md", headers=acme.headers).status_code == 204
    docs = client.get("/v1/kbs/docs/documents", headers=acme.headers).json()
    assert len(docs) == 9 and "source" not in docs[0]
    assert client.delete("/v1/kbs/docs/documents/bupropion.md", headers=acme.headers).status_code == 404
    assert client.delete("/v1/kbs/docs", headers=acme.headers).status_code == 204
    assert client.get("/v1/kbs/docs", headers=acme.headers).status_code == 404


@pytest.mark.heavy
def test_the_api_names_chunkers_and_modes_from_the_registries(client: TestClient) -> None:
    schemas = client.get("/openapi.json").json()["components"]["schemas"]
    chunker = schemas["KBIn"]["properties"]["chunker"]["anyOf"][0]
    assert chunker["enum"] == list(CHUNKERS)
    assert schemas["SearchIn"]["properties"]["mode"]["enum"] == list(MODES)
    assert {"rrf", "fused"} <= set(schemas["ChunkOut"]["required"])


def test_ask_over_http_is_the_cli_object(client: TestClient) -> None:
    acme = tenant(client, "acme")
    kb_with_sample(client, acme)
    data = client.post("/v1/kbs/docs/ask", json={"question": COVERED}, headers=acme.headers).json()
    assert set(data) == {"status", "question", "answer", "citations", "reason", "path", "related",
                         "chunks", "gate", "dropped", "warnings", "timings", "query_id", "citation_precision",
                         "feedback_token", "standalone_question", "uncovered"}


def test_a_citation_carries_its_documents_title(client: TestClient) -> None:
    """A reader is shown "Bupropion for Stopping Smoking", not "bupropion.md" (the widget):
    ``title`` is a key added beside the others, which stay as they were."""
    acme = tenant(client, "acme")
    kb_with_sample(client, acme)
    data = client.post("/v1/kbs/docs/ask", json={"question": COVERED}, headers=acme.headers).json()
    titles = {c["doc_id"]: c["title"] for c in data["citations"]}
    assert titles == {"varenicline.md": "Varenicline", "bupropion.md": "Bupropion for Stopping Smoking"}
    schema = client.get("/openapi.json").json()["components"]["schemas"]["CitationOut"]
    assert "title" in schema["properties"] and "title" not in schema["required"]


def test_dropped_sentences_carry_their_reason_and_a_widget_sees_no_quote(tmp_path: Path) -> None:
    """A refusal at the citation check lists each sentence it removed with the reason; a
    widget key gets the reason only (a draft may quote a passage it was not shown)."""
    unsupported = "scripted:Varenicline cures every smoker in a week [1]."
    settings = settings_for(tmp_path / "api.db", generators=["extractive", unsupported])
    with TestClient(make_app(settings)) as client:
        acme = tenant(client, "acme")
        assert client.post("/v1/kbs", json={"name": "docs", "generator": unsupported},
                           headers=acme.headers).status_code == 201
        client.post("/v1/kbs/docs/documents?wait=true", headers=acme.headers,
                    files=[("files", ("varenicline.md", (SAMPLE / "varenicline.md").read_bytes()))])
        data = client.post("/v1/kbs/docs/ask", json={"question": COVERED}, headers=acme.headers).json()
        assert data["path"] == "citation_check"
        [dropped] = data["dropped"]
        assert dropped["sentence"] == "Varenicline cures every smoker in a week."
        assert dropped["reason"] and dropped["reason"] != dropped["sentence"]
        widget = tenant(client, "acme", kind="widget", kb="docs", origins=["https://shop.example"])
        shown = client.post("/v1/kbs/docs/ask", json={"question": COVERED},
                            headers={**widget.headers, "Origin": "https://shop.example"}).json()
        assert shown["dropped"] == [{"sentence": None, "reason": dropped["reason"]}]


def test_keys_are_stored_hashed_and_revocable(client: TestClient, api_settings: Settings) -> None:
    acme = tenant(client, "acme")
    with closing(sqlite3.connect(api_settings.db)) as db:
        rows = db.execute("SELECT key_hash, prefix FROM api_keys").fetchall()
    assert rows == [(hashlib.sha256(acme.key.encode()).hexdigest(), acme.key[:10])]
    assert acme.key.encode() not in Path(api_settings.db).read_bytes()
    listed = client.get("/v1/admin/tenants/acme/keys", headers=ADMIN).json()
    assert "key" not in listed[0] and listed[0]["prefix"] == acme.key[:10]
    assert client.get("/v1/kbs", headers=acme.headers).status_code == 200
    assert client.delete(f"/v1/admin/tenants/acme/keys/{listed[0]['id']}", headers=ADMIN).status_code == 204
    r = client.get("/v1/kbs", headers=acme.headers)
    assert r.status_code == 401 and r.json()["detail"] == "Unknown or revoked API key."


def test_admin_endpoints_need_the_admin_key(client: TestClient) -> None:
    acme = tenant(client, "acme")
    assert client.get("/v1/admin/tenants").status_code == 401
    assert client.get("/v1/admin/tenants", headers=acme.headers).status_code == 403
    assert client.get("/v1/kbs").status_code == 401
    assert client.get("/v1/kbs", headers=ADMIN).status_code == 401
    assert client.post("/v1/admin/tenants", json={"name": "acme"}, headers=ADMIN).status_code == 409


def test_rate_limit_answers_429_with_retry_after(client: TestClient) -> None:
    slow = tenant(client, "slow", rate_per_minute=2)
    assert [client.get("/v1/kbs", headers=slow.headers).status_code for _ in range(2)] == [200, 200]
    r = client.get("/v1/kbs", headers=slow.headers)
    assert r.status_code == 429 and int(r.headers["Retry-After"]) == 30
    assert "retry after 30 s" in r.json()["detail"]
    other = tenant(client, "other")
    assert client.get("/v1/kbs", headers=other.headers).status_code == 200


def test_streamed_ask_sends_stage_events(client: TestClient) -> None:
    acme = tenant(client, "acme")
    kb_with_sample(client, acme)
    for how in ({"headers": {**acme.headers, "Accept": "text/event-stream"}},
                {"headers": acme.headers, "params": {"stream": "true"}}):
        r = client.post("/v1/kbs/docs/ask", json={"question": COVERED}, **how)
        assert r.headers["content-type"].startswith("text/event-stream")
        events = [block.split("\n", 1) for block in r.text.strip().split("\n\n")]
        names = [e[0].removeprefix("event: ") for e in events]
        assert names == ["retrieved", "decision", "answer"]
        data = [json.loads(e[1].removeprefix("data: ")) for e in events]
        assert data[0]["chunks"] and data[1]["answer"] is True
        assert data[2]["status"] == "answered" and data[2]["feedback_token"]
    r = client.post("/v1/kbs/docs/ask?stream=true", json={"question": OUT_OF_SCOPE}, headers=acme.headers)
    assert "event: decision" in r.text and "event: refusal" in r.text
    r = client.post("/v1/kbs/docs/ask?stream=true", json={"question": "  "}, headers=acme.headers)
    assert r.status_code == 422 and "empty" in r.json()["detail"]


def test_metrics_count_requests_and_answers_per_kb(client: TestClient) -> None:
    acme = tenant(client, "acme")
    kb_with_sample(client, acme)
    client.post("/v1/kbs/docs/ask", json={"question": COVERED}, headers=acme.headers)
    client.post("/v1/kbs/docs/ask", json={"question": OUT_OF_SCOPE}, headers=acme.headers)
    client.post("/v1/kbs/docs/ask", json={"question": OUT_OF_SCOPE}, headers=acme.headers)
    assert client.get("/metrics").status_code == 401
    text = client.get("/metrics", headers=ADMIN).text
    assert 'citewise_asks_total{kb="1/docs",status="answered"} 1.0' in text
    assert 'citewise_asks_total{kb="1/docs",status="refused"} 2.0' in text
    assert 'citewise_http_requests_total{method="POST",route="/v1/kbs/{kb}/ask",status="200"} 3.0' in text
    assert ('citewise_http_request_duration_seconds_bucket{le="+Inf",method="POST",'
            'route="/v1/kbs/{kb}/ask"} 3.0') in text


def test_metrics_count_the_knowledge_base_cache(tmp_path) -> None:
    """One process's worker threads share one cache: the keyword index of a knowledge base is
    built once (a miss) and then served (hits); a budget of one knowledge base's entries (dense
    ~170 kB, keyword index with its chunk records and stems ~640 kB) evicts one when the other
    is searched."""
    url = f"sqlite:///{tmp_path}/c.db?cache_bytes=1000000"
    with TestClient(make_app(settings_for(url, metrics_public=True))) as c:  # type: ignore[arg-type]
        acme = tenant(c, "acme")
        kb_with_sample(c, acme, "one")
        kb_with_sample(c, acme, "two")
        for _ in range(3):
            r = c.post("/v1/kbs/one/search", json={"query": COVERED, "mode": "bm25"},
                       headers=acme.headers)
            assert r.status_code == 200 and r.json()["chunks"]
        text = c.get("/metrics").text
        assert 'citewise_kb_cache_misses_total{kind="keyword"} 1.0' in text
        assert 'citewise_kb_cache_hits_total{kind="keyword"} 2.0' in text
        assert 'citewise_kb_cache_evictions_total{kind="keyword"} 0.0' in text
        assert 'citewise_kb_cache_budget_bytes 1e+06' in text
        c.post("/v1/kbs/two/search", json={"query": COVERED, "mode": "bm25"}, headers=acme.headers)
        text = c.get("/metrics").text
        assert 'citewise_kb_cache_misses_total{kind="keyword"} 2.0' in text
        assert 'citewise_kb_cache_evictions_total{kind="keyword"} 1.0' in text
        assert 'citewise_kb_cache_entries{kind="keyword"} 1.0' in text


def test_metrics_can_be_public(tmp_path) -> None:
    with TestClient(make_app(settings_for(tmp_path / "m.db", metrics_public=True))) as c:
        assert c.get("/metrics").status_code == 200


def test_widget_script_is_served_and_never_parses_server_text_as_html(client: TestClient) -> None:
    r = client.get("/widget.js")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/javascript")
    assert "data-kb" in r.text and "textContent" in r.text
    assert "innerHTML" not in r.text and "insertAdjacentHTML" not in r.text


def test_the_redoc_script_asks_nothing_of_its_cdn(client: TestClient) -> None:
    """ReDoc's sidebar logo came from cdn.redoc.ly: a load /redoc's policy refused, and an
    error in the browser's console (``test_browser_docs.py`` looks in a real browser)."""
    r = client.get("/docs-assets/redoc.standalone.js")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/javascript")
    assert "cdn.redoc.ly" not in r.text and "Redoc" in r.text
    assert client.get("/docs-assets/swagger-ui.css").status_code == 200  # the folder's others
