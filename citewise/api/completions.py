"""OpenAI-compatible chat: ``POST /v1/chat/completions`` and ``GET /v1/models``, so that chat
front-ends and OpenAI's SDKs can ask a knowledge base as if it were a model.

``model`` names a knowledge base the key may use (a tenant key: its tenant's; a widget key: its
one, from its origins, as on the ask route). The last user message is the question; the user and
assistant messages before it are its history (follow-ups are made standalone, as with ``ask``'s
``history``); system messages are ignored. The reply is one assistant message whose content is
the answer with its ``[n]`` markers and, unless the request says ``"sources": false``, a
Markdown list of the sources they point to (Open WebUI, AnythingLLM and LibreChat show the
content alone), or, for a refusal, the reason in plain words, with ``finish_reason`` "stop"
either way; the extra fields ``citations`` (the passages the markers
point to) and ``citewise`` (the whole ask object, with the ask route's rules: ``query_id`` null,
a widget key's refusal without passage texts) say which it was. Streamed (``"stream": true``),
the content comes as ``chat.completion.chunk`` deltas, a checked sentence at a time, the last
chunk carries ``finish_reason`` and the extra fields, and ``data: [DONE]`` ends the stream.

Errors carry both shapes: ``{"detail": "...", "error": {"message", "type", "param", "code"}}``,
citewise's ``detail`` and OpenAI's ``error`` (which OpenAI's SDKs raise from), with citewise's
statuses (422 for a bad body, 404 ``model_not_found`` for a knowledge base the key cannot use).
An error after a stream has started is a chunk of that shape (OpenAI's SDK raises it).
"""

from __future__ import annotations

import contextvars
import json
import logging
import queue
import re
import secrets
import time
from collections.abc import Callable, Coroutine, Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from typing import Any

from fastapi import APIRouter, Depends, Path, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, StreamingResponse
from fastapi.routing import APIRoute
from starlette.exceptions import HTTPException
from starlette.responses import Response

from citewise.answer.citations import MARKER
from citewise.answer.followup import MAX_TURN_CHARS, MAX_TURNS
from citewise.answer.questions import check_history, check_question
from citewise.answer.streaming import Final, Sentence
from citewise.api import ask as asking
from citewise.api import passage_links as links
from citewise.api.compute import public_detail
from citewise.api.deps import Caller, Scoped, get_caller, resolve
from citewise.api.models import Problem
from citewise.api.openai_models import ChatIn, ChatOut, ChatProblem, MessageIn, ModelOut, ModelsOut
from citewise.api.problems import ERRORS, status_of
from citewise.errors import CitewiseError, KnowledgeBaseError, QueryError
from citewise.ingest.units import join
from citewise.output import to_dict
from citewise.records import Turn

log = logging.getLogger(__name__)
# a streamed answer runs here, in one thread (a store connection and a compute slot belong to
# the thread that took them), and its chunks are handed to the response
_stream_pool = ThreadPoolExecutor(max_workers=32, thread_name_prefix="citewise-chat")
TYPES = {401: "authentication_error", 403: "permission_error", 429: "rate_limit_error"}
CODES = {401: "invalid_api_key", 404: "model_not_found", 429: "rate_limit_exceeded"}


def openai_error(status: int, detail: str) -> dict[str, Any]:
    kind = TYPES.get(status, "server_error" if status >= 500 else "invalid_request_error")
    return {"detail": detail,
            "error": {"message": detail, "type": kind, "param": None, "code": CODES.get(status)}}


# the errors the app's own handlers answer: citewise's, a body that fails validation, a body
# that is not JSON (FastAPI's 400)
HANDLED = (CitewiseError, RequestValidationError, HTTPException)


class OpenAIErrors(APIRoute):
    """A route whose errors (its dependencies' too: the key check) carry OpenAI's ``error``
    beside ``detail``; status and headers (``WWW-Authenticate``, ``Retry-After``) are those the
    app's own handlers give."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handle = super().get_route_handler()

        async def route(request: Request) -> Response:
            try:
                return await handle(request)
            except HANDLED as e:
                kind = next(k for k in HANDLED if isinstance(e, k))
                plain = await request.app.exception_handlers[kind](request, e)
                kept = {k: v for k, v in plain.headers.items()
                        if k.lower() in ("www-authenticate", "retry-after")}
                detail = json.loads(plain.body)["detail"]
                return JSONResponse(openai_error(plain.status_code, detail),
                                    status_code=plain.status_code, headers=kept)

        return route


def documented(*codes: int) -> dict[int | str, dict[str, Any]]:
    """The error statuses of a route; a body over the limit is refused before any route, in
    the app's plain shape (``limits.py``)."""
    return {code: {"model": Problem if code == 413 else ChatProblem, "description": ERRORS[code]}
            for code in codes}


router = APIRouter(prefix="/v1", tags=["openai-compatible"], route_class=OpenAIErrors)


def text_of(message: MessageIn) -> str:
    if message.content is None or isinstance(message.content, str):
        return message.content or ""
    for part in message.content:
        if part.type != "text":
            raise QueryError(f"citewise reads text only; a message part of type {part.type!r} "
                             "cannot be read.")
    return "\n".join(p.text or "" for p in message.content)


def conversation(messages: list[MessageIn]) -> tuple[str, list[Turn]]:
    """The question (the last user message) and the turns before it, the latest
    ``MAX_TURNS``, each cut to ``MAX_TURN_CHARS`` as ``citewise chat`` keeps them."""
    said = [Turn(m.role, text) for m in messages if m.role in ("user", "assistant")
            if (text := text_of(m)).strip()]
    if not said or said[-1].role != "user":
        raise QueryError("The last message must be the user's question (role \"user\").")
    earlier = [Turn(t.role, t.content[:MAX_TURN_CHARS]) for t in said[:-1][-MAX_TURNS:]]
    return said[-1].content, earlier


def reply(data: dict[str, Any]) -> str:
    return data["answer"] if data["status"] == "answered" else data["reason"]


def sources(data: dict[str, Any], links: dict[str, str] | None = None) -> str:
    """An answer's sources as Markdown, to follow its text: a line per citation, its number,
    document title and section, linked to its passage's page where ``links`` has one; empty
    for a refusal."""
    if data["status"] != "answered" or not data["citations"]:
        return ""
    lines = []
    for c in data["citations"]:
        name = _markdown_text((c.get("title") or c["doc_id"])
                              + (f" › {c['section']}" if c["section"] else ""))
        url = (links or {}).get(c["chunk_id"])
        lines.append(f"- [{c['n']}] " + (f"[{name}]({url})" if url else name))
    return "\n\n**Sources**\n\n" + "\n".join(lines)


def _markdown_text(text: str) -> str:
    """``text`` shown as itself in Markdown: its markup characters escaped, on one line."""
    return re.sub(r"([\\`*_\[\]<>#|])", r"\\\1", " ".join(text.split()))


def passage_links(s: Scoped, data: dict[str, Any]) -> dict[str, str]:
    """Each citation's public link (by chunk id), where the service has a public URL."""
    settings = s.caller.services.settings
    found = {c["chunk_id"]: links.link(settings, s.kb, c["chunk_id"]) for c in data["citations"]}
    return {chunk: url for chunk, url in found.items() if url}


class Completion:
    """One chat completion's id, time and model, and the bodies that carry it."""

    def __init__(self, model: str) -> None:
        self.id, self.created, self.model = f"chatcmpl-{secrets.token_hex(12)}", int(time.time()), model

    def whole(self, data: dict[str, Any], listed: dict[str, str] | None) -> dict[str, Any]:
        """The completion; ``listed``: the sources list's passage links (None: no list)."""
        content = reply(data) + (sources(data, listed) if listed is not None else "")
        return {"id": self.id, "object": "chat.completion", "created": self.created,
                "model": self.model, "usage": None, "citations": data["citations"], "citewise": data,
                "choices": [{"index": 0, "finish_reason": "stop", "logprobs": None,
                             "message": {"role": "assistant", "content": content, "refusal": None}}]}

    def chunk(self, delta: dict[str, Any], finish: str | None = None, **extra: Any) -> str:
        body = {"id": self.id, "object": "chat.completion.chunk", "created": self.created,
                "model": self.model, **extra,
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}]}
        return f"data: {json.dumps(body, ensure_ascii=False)}\n\n"


def _stream(request: Request, s: Scoped, question: str, history: list[Turn],
            completion: Completion, listed: bool = True) -> Iterator[str]:
    events: queue.Queue[Sentence | Final | CitewiseError | None] = queue.Queue()

    def run() -> None:
        try:
            with s.compute():
                for event in s.engine().ask_stream(s.kb, question, history=history):
                    events.put(event)
        except CitewiseError as e:
            events.put(e)
        finally:
            events.put(None)

    _stream_pool.submit(contextvars.copy_context().run, run)  # with the request's departure
    yield completion.chunk({"role": "assistant", "content": ""})
    sent, shown, cited = "", [], []
    while (event := events.get()) is not None:
        if isinstance(event, Sentence):
            # the answer's text is its sentences joined as ``units.join`` writes them (a list
            # item on a line of its own, rows of one table under one header): join what came
            # so far and send what it added (joining more only ever appends)
            shown.append(event.text)
            cited.append(tuple(MARKER.findall(event.text)))  # its sources, renumbered alike
            text = join(shown, cited)
            if text.startswith(sent) and text != sent:
                yield completion.chunk({"content": text[len(sent):]})
                sent = text
        elif isinstance(event, Final):
            data = asking._shown(s, to_dict(event.result))
            asking._count(request, s, data)
            text = reply(data)
            if text.startswith(sent) and text != sent:  # the refusal, or the closing sentence
                yield completion.chunk({"content": text[len(sent):]})
            listing = sources(data, passage_links(s, data)) if listed else ""
            if listing:
                yield completion.chunk({"content": listing})
            yield completion.chunk({}, "stop", citations=data["citations"], citewise=data)
        else:
            yield f"data: {json.dumps(openai_error(status_of(event), public_detail(event)))}\n\n"
    yield "data: [DONE]\n\n"


@router.post("/chat/completions", response_model=ChatOut,
             responses={200: {"content": {"text/event-stream": {}},
                              "description": "The completion; or its chunks when streamed."},
                        **documented(400, 401, 403, 404, 413, 422, 429, 502, 503)})
def chat_completions(body: ChatIn, request: Request, caller: Caller = Depends(get_caller)):
    """Ask a knowledge base (`model`) with OpenAI's chat API (tenant or widget key). The answer
    keeps its [n] markers and ends with a Markdown list of its sources (`"sources": false`
    leaves it out); `citations` and `citewise` (the ask object) are extra fields; a refusal is
    an ordinary assistant message with `finish_reason` "stop"."""
    s = resolve(caller, body.model)
    asked, earlier = conversation(body.messages)
    question, history = check_question(asked), list(check_history(earlier))
    completion = Completion(s.name)
    if body.stream:
        s.check_compute()  # a plain 429 or 422 now, rather than an error chunk later
        return StreamingResponse(_stream(request, s, question, history, completion, body.sources),
                                 media_type="text/event-stream",
                                 headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})
    with s.compute():
        data = asking._shown(s, to_dict(s.engine().ask(s.kb, question, history=history)))
    asking._count(request, s, data)
    return JSONResponse(completion.whole(data, passage_links(s, data) if body.sources else None))


def _model(s: Scoped) -> dict[str, Any]:
    try:
        created = int(datetime.fromisoformat(s.kb.created_at).timestamp())
    except ValueError:
        created = 0
    return {"id": s.name, "object": "model", "created": created, "owned_by": "citewise"}


@router.get("/models", response_model=ModelsOut, responses=documented(400, 401, 403, 429, 503))
def list_models(caller: Caller = Depends(get_caller)) -> dict[str, Any]:
    """The knowledge bases the key may use, as models (a widget key: its one)."""
    if caller.key.kind == "widget":
        try:
            shown = [resolve(caller, caller.key.kb or "")]
        except KnowledgeBaseError:  # deleted since the key was made
            shown = []
    else:
        shown = [Scoped(kb, caller) for kb in caller.services.store().list_kbs(tenant=caller.key.tenant_id)]
    return {"object": "list", "data": [_model(s) for s in shown]}


@router.get("/models/{model}", response_model=ModelOut,
            responses=documented(400, 401, 403, 404, 422, 429, 503))
def get_model(model: str = Path(..., min_length=1, max_length=64), caller: Caller = Depends(get_caller)):
    """One knowledge base the key may use, as a model."""
    return _model(resolve(caller, model))


__all__ = ["router"]
