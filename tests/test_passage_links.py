"""Sources a person can click in a chat front-end: where the service has a public URL, each
source in a chat completion's list links to a page of its passage, opened without a key; the
link is signed, so an altered or made-up one reads nothing, an expired one says so, and a link
of one knowledge base never shows another's passage."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import replace

import pytest
from fastapi.testclient import TestClient
from pydantic import SecretStr, ValidationError

from citewise.api import passage_links
from citewise.errors import PassageLinkError
from citewise.stores import open_store
from tests.api_fixtures import COVERED, kb_with_sample, make_app, settings_for, tenant

PUBLIC = "https://kb.example.com/help"
LINE = re.compile(r"^- \[(\d+)\] \[(.+)\]\((\S+)\)$")


@pytest.fixture(name="service")
def service_fixture(tmp_path) -> Iterator[tuple[TestClient, dict]]:
    settings = settings_for(tmp_path / "links.db", public_url=PUBLIC + "/")
    with TestClient(make_app(settings)) as client:
        acme, globex = tenant(client, "acme"), tenant(client, "globex")
        kb_with_sample(client, acme)
        kb_with_sample(client, globex, "theirs")
        yield client, {"acme": acme, "globex": globex, "settings": settings}


def ask(client: TestClient, who, model: str = "docs", **body: object) -> dict:
    r = client.post("/v1/chat/completions", headers=who.headers,
                    json={"model": model, "messages": [{"role": "user", "content": COVERED}], **body})
    assert r.status_code == 200, r.text
    return r.json()


def opened(client: TestClient, url: str):
    assert url.startswith(PUBLIC + "/passages/")
    return client.get(url.removeprefix(PUBLIC))  # behind the proxy that serves PUBLIC


def test_each_source_links_to_its_passage_which_opens_without_a_key(service) -> None:
    client, who = service
    completion = ask(client, who["acme"])
    listed = completion["choices"][0]["message"]["content"].split("\n\n**Sources**\n\n")[1]
    citations = {c["n"]: c for c in completion["citations"]}
    for line in listed.splitlines():
        n, name, url = LINE.match(line).groups()  # type: ignore[union-attr]
        cited = citations[int(n)]
        assert name == f"{cited['title']} › {cited['section']}".replace("[", "\\[")
        page = opened(client, url)
        assert page.status_code == 200 and "Authorization" not in page.request.headers
        assert page.headers["content-security-policy"].startswith("default-src 'none'")
        text = page.text
        assert f"<h1>{cited['title']}</h1>" in text and cited["section"] in text
        assert cited["quote"].split()[0] in text  # the passage the citation points to


def test_a_streamed_answer_lists_the_same_links(service) -> None:
    client, who = service
    with client.stream("POST", "/v1/chat/completions", headers=who["acme"].headers,
                       json={"model": "docs", "stream": True,
                             "messages": [{"role": "user", "content": COVERED}]}) as r:
        body = "".join(r.iter_text())
    assert "**Sources**" in body and f"]({PUBLIC}/passages/" in body


def test_an_altered_or_made_up_link_reads_nothing(service) -> None:
    client, who = service
    url = LINE.match(ask(client, who["acme"])["choices"][0]["message"]["content"]
                     .split("**Sources**\n\n")[1].splitlines()[0]).group(3)  # type: ignore[union-attr]
    body, signature = url.rsplit("/", 1)[1].split(".")
    for token in (body + "." + signature[::-1], body[:-2] + "." + signature, "x.y", "nothing",
                  "." + signature, "a" * 400):
        page = client.get(f"/passages/{token}")
        assert page.status_code == 404 and "not valid" in page.text and "Returns" not in page.text
    assert client.get("/passages/" + "a" * 401).status_code == 422  # past its size limit


def test_a_link_never_opens_another_knowledge_base_and_expires(service) -> None:
    client, who = service
    settings = who["settings"]
    store = open_store(settings.db)
    acme, globex = (store.tenants.get_tenant(name).id for name in ("acme", "globex"))
    theirs, docs = store.get_kb("theirs", tenant=globex), store.get_kb("docs", tenant=acme)
    chunk = next(iter(store.chunks(docs, list(store.dense_index(docs).keys[:1])).values()))
    page = opened(client, passage_links.link(settings, docs, chunk.id))
    assert page.status_code == 200 and chunk.text[:40] in page.text
    mine = replace(theirs, tenant_id=acme, name="docs")  # globex's kb id, said to be acme's docs
    page = opened(client, passage_links.link(settings, mine, chunk.id))
    assert page.status_code == 404 and "no longer" in page.text
    # a link of a passage that is not there (re-ingested away) says so
    missing = opened(client, passage_links.link(settings, theirs, "f" * 16))
    assert missing.status_code == 404 and "no longer" in missing.text
    old = passage_links.link(settings, theirs, "f" * 16, now=0)
    page = opened(client, old)
    assert page.status_code == 410 and "expired on 1 April 1970" in page.text
    with pytest.raises(PassageLinkError):  # another admin key: not valid
        passage_links.opened(settings.model_copy(update={"admin_key": SecretStr("y" * 32)}),
                             old.rsplit("/", 1)[1])


def test_no_public_url_no_links_and_a_bad_one_is_refused(tmp_path) -> None:
    settings = settings_for(tmp_path / "plain.db")
    with TestClient(make_app(settings)) as client:
        acme = tenant(client, "acme")
        kb_with_sample(client, acme)
        listed = ask(client, acme)["choices"][0]["message"]["content"].split("**Sources**\n\n")[1]
    assert listed and "](" not in listed and all(re.match(r"- \[\d+\] \S", line)
                                                 for line in listed.splitlines())
    for bad in ("kb.example.com", "ftp://kb.example.com", "https://", "https://a.b/?x=1"):
        with pytest.raises(ValidationError, match="CITEWISE_PUBLIC_URL"):
            settings_for(tmp_path / "x.db", public_url=bad)
