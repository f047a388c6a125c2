"""The engine with a hosted generator (the real openai SDK, transport mocked): answers that pass
the citation check, refusals when generation fails or nothing holds, and streamed answers."""

from __future__ import annotations

import html
import json
import re
from pathlib import Path

import httpx
import pytest
from typer.testing import CliRunner

from citewise import generators
from citewise.answer.streaming import Final, Sentence
from citewise.cli import app
from citewise.embedders import questions_in_flight
from citewise.engine import Engine
from citewise.generators.openai_api import OpenAIGenerator
from citewise.output import to_dict
from citewise.records import Answer, Refusal
from citewise.sentences import split_sentences
from tests.helpers import SAMPLE
from tests.providers import Script, error, openai_chat, openai_stream

QUESTION = "varenicline dose schedule days 1 to 3 once daily"
PASSAGE = re.compile(r'<passage n="(\d+)"[^>]*>\n(.*?)\n</passage>', re.S)


def quoting(request: httpx.Request) -> str:
    """What a faithful model writes: the first sentence of passages 1 and 2, cited."""
    user = json.loads(request.content)["messages"][1]["content"]
    passages = {int(n): html.unescape(t) for n, t in PASSAGE.findall(user)}
    first = [split_sentences(passages[n])[0].rstrip(".:") for n in (1, 2)]
    return f"{first[0]} [1]. {first[1]} [2]."


def use_openai(monkeypatch: pytest.MonkeyPatch, script: Script | None = None, handler=None) -> Script:
    script = script or Script(openai_chat(""))
    transport = httpx.MockTransport(handler or script.handle)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setitem(generators.REGISTRY, "openai", lambda arg, emb: OpenAIGenerator(
        arg, http_client=httpx.Client(transport=transport), sleep=script.sleep))
    return script


@pytest.fixture
def kb(engine: Engine):
    kb = engine.open_kb("s", embedder="hashing:256")
    engine.ingest(kb, [SAMPLE])
    return kb


def test_a_faithful_draft_is_answered_with_precision(engine: Engine, kb, monkeypatch) -> None:
    use_openai(monkeypatch, handler=lambda r: openai_chat(quoting(r)))
    result = engine.ask(kb, QUESTION, generator="openai:gpt-4o-mini")
    assert isinstance(result, Answer), result
    assert result.text.endswith("[2].") and len(result.citations) == 2
    assert result.citation_precision == 1.0 and to_dict(result)["citation_precision"] == 1.0


def test_the_extractive_path_passes_the_same_check(engine: Engine, kb) -> None:
    result = engine.ask(kb, QUESTION)
    assert isinstance(result, Answer) and result.citation_precision == 1.0 and not result.dropped


def test_generation_failure_is_a_refusal_listing_the_sources(engine: Engine, kb, monkeypatch) -> None:
    script = use_openai(monkeypatch, Script(error(503)))
    result = engine.ask(kb, QUESTION, generator="openai:gpt-4o-mini")
    assert isinstance(result, Refusal) and result.path == "generation_failed"
    assert len(script.requests) == 4 and len(script.sleeps) == 3
    assert result.reason.startswith("An answer could not be generated, so none is given")
    assert "server failed (503)" in result.reason
    assert "The retrieved sources are: [1] " in result.reason and "varenicline.md" in result.reason
    assert "Related topics: " in result.reason and result.related
    assert to_dict(result)["answer"] is None and to_dict(result)["citation_precision"] is None


def test_a_citation_of_a_missing_passage_never_reaches_the_answer(engine: Engine, kb, monkeypatch) -> None:
    use_openai(monkeypatch, handler=lambda r: openai_chat(
        quoting(r).replace("[2]", "[9]") + " Varenicline cures all addictions."))
    result = engine.ask(kb, QUESTION, generator="openai:gpt-4o-mini")
    assert isinstance(result, Answer)
    assert "[9]" not in result.text and "cures" not in result.text and len(result.citations) == 1
    reasons = {d.sentence: d.reason for d in result.dropped}
    assert reasons["Varenicline cures all addictions."] == "it cites no passage"
    assert any("passage 9, which does not exist" in r for r in reasons.values())
    assert to_dict(result)["dropped"] == [{"sentence": d.sentence, "reason": d.reason}
                                         for d in result.dropped]
    assert result.citation_precision == 0.5


def test_nothing_supported_or_the_fallback_is_a_refusal(engine: Engine, kb, monkeypatch) -> None:
    use_openai(monkeypatch, Script(openai_chat("Varenicline is given at 7 mg hourly [1].")))
    result = engine.ask(kb, QUESTION, generator="openai:gpt-4o-mini")
    assert isinstance(result, Refusal) and result.path == "citation_check" and result.related
    # the refusal says which sentence the check removed and why, instead of "dropped": []
    [dropped] = to_dict(result)["dropped"]
    assert dropped["sentence"] == "Varenicline is given at 7 mg hourly."
    assert "7" in dropped["reason"]  # "7 mg does not match the passage's units"
    use_openai(monkeypatch, Script(openai_chat(generators.FALLBACK)))
    result = engine.ask(kb, QUESTION, generator="openai:gpt-4o-mini")
    assert isinstance(result, Refusal) and "do not answer your question" in result.reason
    assert result.related


def test_a_stream_yields_only_checked_sentences_then_the_result(engine: Engine, kb, monkeypatch) -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        text = quoting(request)
        bad = " Varenicline is taken at 9 mg [1]. "
        draft = text.split(" [1]. ")[0] + " [1]." + bad + text.split(" [1]. ")[1]
        if not json.loads(request.content).get("stream"):
            return openai_chat(draft)
        return openai_stream([draft[i : i + 5] for i in range(0, len(draft), 5)])

    use_openai(monkeypatch, handler=handler)
    events = list(engine.ask_stream(kb, QUESTION, generator="openai:gpt-4o-mini"))
    streamed = [e for e in events if isinstance(e, Sentence)]
    final = events[-1]
    assert isinstance(final, Final) and isinstance(final.result, Answer)
    assert " ".join(e.text for e in streamed) == final.result.text and len(streamed) == 2
    assert [c for e in streamed for c in e.citations] == list(final.result.citations)
    assert final.result.dropped and "9 mg" not in final.result.text
    plain = engine.ask(kb, QUESTION, generator="openai:gpt-4o-mini")
    assert isinstance(plain, Answer) and plain.text == final.result.text
    assert plain.dropped == final.result.dropped and plain.citation_precision == 2 / 3


def test_a_streamed_answer_is_a_question_in_flight_while_it_drafts(engine: Engine, kb,
                                                                   monkeypatch) -> None:
    """The local embedder picks its threads by the questions in flight: a streamed answer is
    one of them for every step it runs (it was not, and ran as if the server were idle)."""
    seen: list[bool] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(questions_in_flight.answering_here())
        return openai_stream([quoting(request)])

    use_openai(monkeypatch, handler=handler)
    stream = engine.ask_stream(kb, QUESTION, generator="openai:gpt-4o-mini")
    assert not questions_in_flight.answering_here()
    *_, final = stream
    assert isinstance(final.result, Answer) and seen == [True]
    assert not questions_in_flight.answering_here()


def test_a_stream_that_breaks_after_a_sentence_keeps_it(engine: Engine, kb, monkeypatch) -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        good = quoting(request).split(" [1]. ")[0] + " [1]. Next"
        body = openai_stream([good]).content.decode().split("data: [DONE]")[0]
        return httpx.Response(200, content=(body + "data: {not json\n\n").encode(),
                              headers={"content-type": "text/event-stream"})

    use_openai(monkeypatch, handler=handler)
    *_, final = engine.ask_stream(kb, QUESTION, generator="openai:gpt-4o-mini")
    assert isinstance(final.result, Answer) and len(final.result.citations) == 1
    assert "stopped early" in final.result.warnings[-1] and "mid-stream" in final.result.warnings[-1]


def test_cli_ask_with_a_hosted_generator(tmp_path: Path, monkeypatch) -> None:
    use_openai(monkeypatch, handler=lambda r: openai_chat(quoting(r)))
    runner = CliRunner()
    db = str(tmp_path / "kb.db")
    runner.invoke(app, ["--db", db, "ingest", "--kb", "s", "--embedder", "hashing:256", "-q", str(SAMPLE)])
    r = runner.invoke(app, ["--db", db, "ask", "--kb", "s", QUESTION, "--generator", "openai:gpt-4o-mini",
                            "--json"])
    data = json.loads(r.output)
    assert data["status"] == "answered" and data["citation_precision"] == 1.0, r.output


def test_cli_ask_streams_checked_sentences(tmp_path: Path, monkeypatch) -> None:
    use_openai(monkeypatch, handler=lambda r: openai_stream([quoting(r)[:20], quoting(r)[20:]]))
    runner = CliRunner()
    db = str(tmp_path / "kb.db")
    runner.invoke(app, ["--db", db, "ingest", "--kb", "s", "--embedder", "hashing:256", "-q", str(SAMPLE)])
    r = runner.invoke(app, ["--db", db, "ask", "--kb", "s", QUESTION, "--generator", "openai:gpt-4o-mini",
                            "--stream"])
    assert r.exit_code == 0, r.output
    first, rest = r.output.split("\n", 1)
    assert first.startswith("Varenicline is started") and first.rstrip().endswith("[2].")
    assert "Sources:" in rest and "[1] varenicline.md" in rest and "\n  [2] " in rest, r.output
