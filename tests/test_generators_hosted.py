"""The hosted generators through the real ``openai`` and ``google-genai`` SDKs, transport mocked:
the exact request, the parsing, streaming, and every provider fault."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from citewise.errors import ConfigError, GenerationError, UnknownNameError
from citewise.generators import REGISTRY, get_generator, prompts
from citewise.generators.gemini_api import GeminiGenerator
from citewise.generators.openai_api import OpenAIGenerator
from citewise.records import Candidate, Chunk
from tests.providers import Script, error, gemini_chat, gemini_reply, openai_chat, openai_stream, sse

CONTEXT = [
    Candidate(Chunk("varenicline.md", 0, ("Varenicline", "Dosing"),
                    "Take 0.5 mg once daily on days 1 to 3.", "Varenicline"), 0.7),
    Candidate(Chunk("withdrawal.md", 0, ("Withdrawal", "Timeline"),
                    "Symptoms persist for 4 weeks.", "Nicotine withdrawal"), 0.6),
]
ANSWER = "Varenicline starts at 0.5 mg once daily on days 1 to 3 [1]."


@pytest.fixture(autouse=True)
def keys(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setenv("GEMINI_API_KEY", "gm-test")
    monkeypatch.delenv("GOOGLE_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_COMPATIBLE_API_KEY", raising=False)


def openai_gen(script: Script, **kw: object) -> OpenAIGenerator:
    return OpenAIGenerator("gpt-4o-mini", http_client=script.client(), sleep=script.sleep, **kw)  # type: ignore[arg-type]


def gemini_gen(script: Script) -> GeminiGenerator:
    return GeminiGenerator("gemini-2.5-flash", http_client=script.client(), sleep=script.sleep)


def test_openai_sends_the_contract_at_temperature_0_1() -> None:
    script = Script(openai_chat(ANSWER))
    draft = openai_gen(script).generate("How is varenicline started?", CONTEXT)
    assert (draft.text, draft.model) == (ANSWER, "openai:gpt-4o-mini")
    (request,) = script.requests
    assert str(request.url) == "https://api.openai.com/v1/chat/completions"
    assert request.headers["authorization"] == "Bearer sk-test"
    body = script.body()
    assert (body["model"], body["temperature"]) == ("gpt-4o-mini", 0.1)
    expected = prompts.build("How is varenicline started?", CONTEXT)
    assert body["messages"] == [{"role": "system", "content": expected.system},
                                {"role": "user", "content": expected.user}]
    user = body["messages"][1]["content"]
    assert '<passage n="1" source="varenicline.md" section="Varenicline › Dosing">' in user
    second = 'section="Nicotine withdrawal › Withdrawal › Timeline"'
    assert f'<passage n="2" source="withdrawal.md" {second}>' in user
    assert "Take 0.5 mg once daily on days 1 to 3." in user
    assert "<question>How is varenicline started?</question>" in user


def test_gemini_sends_the_contract_at_temperature_0_1() -> None:
    script = Script(gemini_chat(ANSWER))
    draft = gemini_gen(script).generate("How is varenicline started?", CONTEXT)
    assert (draft.text, draft.model) == (ANSWER, "gemini:gemini-2.5-flash")
    (request,) = script.requests
    assert str(request.url).endswith("/models/gemini-2.5-flash:generateContent")
    assert request.headers["x-goog-api-key"] == "gm-test"
    body = script.body()
    expected = prompts.build("How is varenicline started?", CONTEXT)
    assert body["generationConfig"] == {"temperature": 0.1}
    assert body["systemInstruction"]["parts"] == [{"text": expected.system}]
    assert body["contents"] == [{"role": "user", "parts": [{"text": expected.user}]}]


def test_openai_compatible_needs_no_key_and_uses_the_url(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY")
    script = Script(openai_chat(ANSWER))
    gen = OpenAIGenerator("llama3.1", base_url="http://localhost:11434/v1", compatible=True,
                          http_client=script.client(), sleep=script.sleep)
    assert gen.generate("q", CONTEXT).model == "openai-compatible:http://localhost:11434/v1#llama3.1"
    assert str(script.requests[0].url) == "http://localhost:11434/v1/chat/completions"
    assert script.body()["model"] == "llama3.1"


def test_specs_and_missing_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    assert {"extractive", "openai", "gemini", "openai-compatible"} <= set(REGISTRY)
    with pytest.raises(UnknownNameError, match="openai-compatible"):
        get_generator("claude:x", None)  # type: ignore[arg-type]
    monkeypatch.delenv("OPENAI_API_KEY")
    monkeypatch.delenv("GEMINI_API_KEY")
    with pytest.raises(ConfigError, match="set the OPENAI_API_KEY environment variable"):
        get_generator("openai:gpt-4o-mini", None)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="GEMINI_API_KEY or GOOGLE_API_KEY"):
        get_generator("gemini:gemini-2.5-flash", None)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="URL#MODEL"):
        get_generator("openai-compatible:llama3", None)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="needs a model"):
        get_generator("openai:", None)  # type: ignore[arg-type]
    monkeypatch.setenv("GOOGLE_API_KEY", "g2")
    assert get_generator("gemini:gemini-2.5-flash", None).name == "gemini:gemini-2.5-flash"  # type: ignore[arg-type]


# -- faults -------------------------------------------------------------------------------------

def test_openai_429_honours_retry_after_then_succeeds() -> None:
    script = Script(error(429, {"retry-after": "7"}), error(503), openai_chat(ANSWER))
    assert openai_gen(script).generate("q", CONTEXT).text == ANSWER
    assert len(script.requests) == 3
    assert script.sleeps == [7.0, 2.0]  # Retry-After, then the backoff of the second attempt


def test_gemini_429_with_retry_after_then_succeeds() -> None:
    script = Script(error(429, {"retry-after": "3"}), gemini_chat(ANSWER))
    assert gemini_gen(script).generate("q", CONTEXT).text == ANSWER
    assert script.sleeps == [3.0]


FAULTS = [
    ("openai", httpx.ReadTimeout, 4, "timed out"),
    ("openai", httpx.ConnectError, 4, "could not connect"),
    ("openai", error(500), 4, "server failed (500)"),
    ("openai", error(429), 4, "rate limited (429)"),
    ("openai", httpx.Response(200, content=b"{not json"), 4, "malformed"),
    ("openai", httpx.Response(200, json={"unexpected": True}), 4, "no choices"),
    ("openai", openai_chat(""), 4, "no text"),
    ("openai", openai_chat(None, finish="content_filter"), 1, "content filter"),
    ("openai", openai_chat(None, refusal="I can't help with that."), 1, "refused to answer"),
    ("openai", error(401), 1, "API key was rejected (401); check OPENAI_API_KEY"),
    ("openai", error(400), 1, "request was refused (400)"),
    ("gemini", httpx.ReadTimeout, 4, "timed out"),
    ("gemini", error(503), 4, "server failed (503)"),
    ("gemini", httpx.Response(200, content=b"<html>oops"), 4, "malformed"),
    ("gemini", httpx.Response(200, json={}), 4, "no candidates"),
    ("gemini", gemini_chat(""), 4, "no text"),
    ("gemini", gemini_chat("", finish="SAFETY"), 1, "refused to answer (finish reason SAFETY)"),
    ("gemini", httpx.Response(200, json={"promptFeedback": {"blockReason": "SAFETY"}}), 1,
     "blocked the prompt"),
    ("gemini", error(403), 1, "API key was rejected (403); check GEMINI_API_KEY or GOOGLE_API_KEY"),
]


@pytest.mark.parametrize(("provider", "reply", "attempts", "message"), FAULTS)
def test_faults_end_in_one_clear_error(provider: str, reply: object, attempts: int, message: str) -> None:
    script = Script(reply)  # type: ignore[arg-type]
    gen = openai_gen(script) if provider == "openai" else gemini_gen(script)
    with pytest.raises(GenerationError, match=f"{gen.name} failed after") as e:
        gen.generate("q", CONTEXT)
    assert message in str(e.value)
    assert len(script.requests) == attempts
    assert len(script.sleeps) == attempts - 1 and all(s <= 60 for s in script.sleeps)


# -- streaming --------------------------------------------------------------------------------

def test_openai_streams_pieces_and_retries_before_the_first() -> None:
    script = Script(error(502), openai_stream(["Varenicline starts ", "at 0.5 mg [1]."]))
    pieces = list(openai_gen(script).stream("q", CONTEXT))
    assert pieces == ["Varenicline starts ", "at 0.5 mg [1]."]
    assert script.body()["stream"] is True and script.body()["temperature"] == 0.1
    assert len(script.requests) == 2


def test_gemini_streams_pieces() -> None:
    script = Script(sse([gemini_reply("Varenicline starts "), gemini_reply("at 0.5 mg [1].")]))
    assert list(gemini_gen(script).stream("q", CONTEXT)) == ["Varenicline starts ", "at 0.5 mg [1]."]
    assert str(script.requests[0].url).endswith(":streamGenerateContent?alt=sse")


def test_a_stream_blocked_for_safety_is_a_generation_error() -> None:
    script = Script(sse([gemini_reply("Sure", "SAFETY")]))
    with pytest.raises(GenerationError, match="SAFETY"):
        list(gemini_gen(script).stream("q", CONTEXT))
    script = Script(openai_stream([], finish="content_filter"))
    with pytest.raises(GenerationError, match="content filter"):
        list(openai_gen(script).stream("q", CONTEXT))


@pytest.mark.heavy
def test_the_offline_path_never_imports_the_sdks(tmp_path) -> None:
    import subprocess
    import sys

    code = (
        "import sys; from pathlib import Path; from citewise.engine import Engine; "
        "from citewise.stores.sqlite import open_sqlite; "
        f"e = Engine(open_sqlite(Path({str(tmp_path / 'x.db')!r}))); "
        "kb = e.open_kb('s', embedder='hashing:64'); e.ingest(kb, [Path('examples/smoking-cessation')]); "
        "e.ask(kb, 'varenicline dose'); "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('openai', 'google')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=str(Path(__file__).resolve().parent.parent))
    assert out.stdout.strip() == "[]"
