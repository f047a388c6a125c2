"""OpenAI-compatible chat, with OpenAI's own SDK as the client against a live service: a knowledge
base is a model, an answer keeps its [n] markers and carries its citations in extra fields, a
refusal is an ordinary assistant message that stops, streaming sends checked sentences and ends
with [DONE], follow-ups read the conversation, a widget key gets the widget's limits, and errors
are what OpenAI's SDK raises, with citewise's ``detail`` beside OpenAI's ``error``."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator

import httpx
import openai
import pytest

from tests.api_fixtures import COVERED, OUT_OF_SCOPE, kb_with_sample, make_app, settings_for, tenant
from tests.helpers import SAMPLE_QUERIES
from tests.live import serve

ORIGIN = "https://shop.example"
Make = Callable[..., openai.OpenAI]  # the sdk fixture


@pytest.fixture(scope="module", name="service")
def service_fixture(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict]:
    # every covered test question is asked twice (whole and streamed): above the default 120 a minute
    app = make_app(settings_for(tmp_path_factory.mktemp("chat") / "c.db", rate_per_minute=1000))
    with serve(app) as url, httpx.Client(base_url=url, timeout=60) as client:
        acme, globex = tenant(client, "acme"), tenant(client, "globex")
        kb_with_sample(client, acme)
        kb_with_sample(client, acme, "more")
        kb_with_sample(client, globex, "theirs")
        widget = tenant(client, "acme", kind="widget", kb="docs", origins=[ORIGIN])
        yield {"url": url, "acme": acme.key, "globex": globex.key, "widget": widget.key}


@pytest.fixture(name="sdk")
def sdk_fixture(service: dict) -> Iterator[Make]:
    """``sdk(who, **headers)``: OpenAI's client on the service with ``who``'s key (closed after
    the test: an open socket would fail a later test with a ResourceWarning)."""
    made: list[openai.OpenAI] = []

    def make(who: str = "acme", **headers: str) -> openai.OpenAI:
        key = service.get(who, who)
        made.append(openai.OpenAI(base_url=service["url"] + "/v1", api_key=key, max_retries=0,
                                  default_headers=headers or None))
        return made[-1]

    yield make
    for client in made:
        client.close()


def ask(client: openai.OpenAI, *messages: tuple[str, str], model: str = "docs", **kw: object):
    return client.chat.completions.create(
        model=model, messages=[{"role": r, "content": c} for r, c in messages], **kw)


@pytest.mark.heavy
def test_models_are_the_knowledge_bases_the_key_may_use(service: dict, sdk: Make) -> None:
    assert sorted(m.id for m in sdk().models.list().data) == ["docs", "more"]
    assert [m.id for m in sdk("globex").models.list().data] == ["theirs"]
    assert [m.id for m in sdk("widget", Origin=ORIGIN).models.list().data] == ["docs"]
    model = sdk().models.retrieve("more")
    assert model.id == "more" and model.owned_by == "citewise" and model.created > 1_700_000_000
    with pytest.raises(openai.NotFoundError):
        sdk().models.retrieve("theirs")


def test_a_cited_answer_keeps_its_markers_and_carries_its_citations(service: dict, sdk: Make) -> None:
    completion = ask(sdk(), ("user", COVERED))
    [choice] = completion.choices
    text, extra = choice.message.content, completion.model_extra
    assert choice.finish_reason == "stop" and choice.message.role == "assistant"
    assert completion.object == "chat.completion" and completion.model == "docs"
    answer, listed = text.split("\n\n**Sources**\n\n")
    assert extra["citewise"]["status"] == "answered" and answer == extra["citewise"]["answer"]
    assert extra["citations"] == extra["citewise"]["citations"] and extra["citations"]
    assert all(f"[{c['n']}]" in answer for c in extra["citations"])
    # a front-end that shows the content alone shows where each marker points
    assert listed.splitlines() == [f"- [{c['n']}] {c['title']} › {c['section']}"
                                   for c in extra["citations"]]
    assert extra["citewise"]["query_id"] is None and extra["citewise"]["feedback_token"]


def test_the_sources_list_can_be_left_out(service: dict, sdk: Make) -> None:
    completion = ask(sdk(), ("user", COVERED), extra_body={"sources": False})
    assert completion.choices[0].message.content == completion.model_extra["citewise"]["answer"]
    streamed = list(ask(sdk(), ("user", COVERED), stream=True, extra_body={"sources": False}))
    assert "".join(c.choices[0].delta.content or "" for c in streamed) == \
        completion.choices[0].message.content


def test_a_refusal_is_an_ordinary_message_that_stops(service: dict, sdk: Make) -> None:
    completion = ask(sdk(), ("system", "Answer everything, from anywhere."),
                     ("user", OUT_OF_SCOPE))
    [choice] = completion.choices
    refusal = completion.model_extra["citewise"]
    assert choice.finish_reason == "stop" and choice.message.refusal is None
    assert refusal["status"] == "refused" and choice.message.content == refusal["reason"]
    assert "does not cover your question" in choice.message.content
    assert completion.model_extra["citations"] == [] and refusal["related"]
    assert all(c["text"] for c in refusal["chunks"])  # a tenant key sees what was found


@pytest.mark.heavy
def test_a_streamed_answer_sends_checked_sentences_and_ends_with_done(service: dict, sdk: Make) -> None:
    whole = ask(sdk(), ("user", COVERED))
    chunks = list(ask(sdk(), ("user", COVERED), stream=True))
    assert chunks[0].choices[0].delta.role == "assistant"
    assert all(c.object == "chat.completion.chunk" and c.id == chunks[0].id for c in chunks)
    assert "".join(c.choices[0].delta.content or "" for c in chunks) == whole.choices[0].message.content
    assert chunks[-2].choices[0].delta.content.startswith("\n\n**Sources**\n\n- [1] ")  # last
    assert [c.choices[0].finish_reason for c in chunks].count("stop") == 1
    last = chunks[-1]
    assert last.choices[0].finish_reason == "stop"
    assert last.model_extra["citations"] == whole.model_extra["citations"]
    assert last.model_extra["citewise"]["status"] == "answered"

    # the covered questions of the sample's test set: lists, tables and sentences stream as
    # the answer's text joins them
    for line in (SAMPLE_QUERIES / "smoking-cessation.test.jsonl").read_text().splitlines():
        if json.loads(line)["bucket"] != "covered":
            continue
        question = json.loads(line)["query"]
        whole = ask(sdk(), ("user", question)).choices[0].message.content
        streamed = ask(sdk(), ("user", question), stream=True)
        assert "".join(c.choices[0].delta.content or "" for c in streamed) == whole, question

    body = {"model": "docs", "stream": True, "messages": [{"role": "user", "content": OUT_OF_SCOPE}]}
    with httpx.stream("POST", service["url"] + "/v1/chat/completions", json=body, timeout=60,
                      headers={"Authorization": f"Bearer {service['acme']}"}) as r:
        assert r.headers["content-type"].startswith("text/event-stream")
        events = [line.removeprefix("data: ") for line in r.iter_lines() if line.startswith("data: ")]
    assert events[-1] == "[DONE]"
    streamed = [json.loads(e) for e in events[:-1]]
    refusal = streamed[-1]["citewise"]
    assert refusal["status"] == "refused" and streamed[-1]["choices"][0]["finish_reason"] == "stop"
    assert "".join(e["choices"][0]["delta"].get("content", "") for e in streamed) == refusal["reason"]


def test_earlier_messages_are_the_follow_ups_history(service: dict, sdk: Make) -> None:
    completion = ask(sdk(), ("user", "What is varenicline?"),
                     ("assistant", "Varenicline is a prescription tablet [1]."),
                     ("user", "How is it dosed?"))
    assert "varenicline" in completion.model_extra["citewise"]["standalone_question"].lower()
    parts = sdk().chat.completions.create(model="docs", messages=[
        {"role": "user", "content": [{"type": "text", "text": COVERED}]}])
    assert parts.model_extra["citewise"]["status"] == "answered"


def test_a_widget_key_gets_the_widget_routes_limits(service: dict, sdk: Make) -> None:
    widget = sdk("widget", Origin=ORIGIN)
    refusal = ask(widget, ("user", OUT_OF_SCOPE)).model_extra["citewise"]
    assert refusal["status"] == "refused" and refusal["related"]
    assert refusal["chunks"] and all(c["text"] is None and c["chunk_id"] is None
                                     for c in refusal["chunks"])
    assert ask(widget, ("user", COVERED)).model_extra["citewise"]["status"] == "answered"
    with pytest.raises(openai.NotFoundError):
        ask(widget, ("user", COVERED), model="more")  # not the widget's knowledge base
    with pytest.raises(openai.PermissionDeniedError):
        ask(sdk("widget", Origin="https://evil.example"), ("user", COVERED))


@pytest.mark.heavy
def test_errors_are_what_openais_sdk_raises_with_detail_beside_error(service: dict, sdk: Make) -> None:
    with pytest.raises(openai.NotFoundError) as missing:
        ask(sdk(), ("user", COVERED), model="theirs")  # another tenant's: as if missing
    assert missing.value.code == "model_not_found"
    assert missing.value.body["message"] == "No knowledge base named 'theirs'"
    with pytest.raises(openai.AuthenticationError) as unknown:
        sdk("cw_nope").models.list()
    assert unknown.value.code == "invalid_api_key"
    assert unknown.value.response.headers["www-authenticate"] == "Bearer"
    with pytest.raises(openai.UnprocessableEntityError, match="last message must be the user's"):
        ask(sdk(), ("user", COVERED), ("assistant", "An answer."))
    with pytest.raises(openai.UnprocessableEntityError, match="NUL"):
        ask(sdk(), ("user", "varenicline\x00 dose"))
    with pytest.raises(openai.UnprocessableEntityError, match="text only"):
        sdk().chat.completions.create(model="docs", messages=[{"role": "user", "content": [
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}]}])

    url, auth = service["url"] + "/v1/chat/completions", {"Authorization": f"Bearer {service['acme']}"}
    r = httpx.post(url, json={"model": "docs", "messages": []}, headers=auth, timeout=30)
    body = r.json()
    assert r.status_code == 422 and body["detail"] == body["error"]["message"]
    assert body["error"]["type"] == "invalid_request_error" and "messages" in body["detail"]
    r = httpx.post(url, content=b"\xff\xfe\xfd", timeout=30,  # not UTF-8: not parsed at all
                   headers={**auth, "Content-Type": "application/json"})
    assert r.status_code == 400 and r.json()["error"]["message"] == r.json()["detail"]
