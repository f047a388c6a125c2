"""Scripted provider responses behind ``httpx.MockTransport``: the real SDKs, no network.

``Script(replies)`` answers each request with the next reply (an ``httpx.Response``, or an
exception class to raise, like ``httpx.ReadTimeout``) and records every request, so a test
asserts exactly what was sent and how many attempts were made.
"""

from __future__ import annotations

import json
from typing import Any

import httpx


class Script:
    def __init__(self, *replies: httpx.Response | type[Exception]) -> None:
        self.replies = list(replies)
        self.requests: list[httpx.Request] = []
        self.sleeps: list[float] = []

    def handle(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        reply = self.replies.pop(0) if len(self.replies) > 1 else self.replies[0]
        if isinstance(reply, type):
            raise reply("scripted fault", request=request)
        return reply

    def client(self) -> httpx.Client:
        return httpx.Client(transport=httpx.MockTransport(self.handle))

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)

    def body(self, i: int = -1) -> Any:
        return json.loads(self.requests[i].content)


def sse(events: list[Any], done: bool = False) -> httpx.Response:
    body = "".join(f"data: {json.dumps(e)}\n\n" for e in events) + ("data: [DONE]\n\n" if done else "")
    return httpx.Response(200, content=body.encode(), headers={"content-type": "text/event-stream"})


def openai_chat(text: str | None, finish: str = "stop", refusal: str | None = None) -> httpx.Response:
    message = {"role": "assistant", "content": text, "refusal": refusal}
    return httpx.Response(200, json={
        "id": "c1", "object": "chat.completion", "created": 1, "model": "m",
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
    })


def openai_stream(pieces: list[str], finish: str = "stop") -> httpx.Response:
    chunks = [{"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": "m",
               "choices": [{"index": 0, "delta": {"content": p}, "finish_reason": None}]}
              for p in pieces]
    chunks.append({"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": "m",
                   "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]})
    return sse(chunks, done=True)


def openai_vectors(rows: list[list[float]]) -> httpx.Response:
    return httpx.Response(200, json={
        "object": "list", "model": "m", "usage": {"prompt_tokens": 1, "total_tokens": 1},
        "data": [{"object": "embedding", "index": i, "embedding": r} for i, r in enumerate(rows)],
    })


def gemini_reply(text: str, finish: str = "STOP") -> dict[str, Any]:
    return {"candidates": [{"content": {"parts": [{"text": text}], "role": "model"},
                            "finishReason": finish}]}


def gemini_chat(text: str, finish: str = "STOP") -> httpx.Response:
    return httpx.Response(200, json=gemini_reply(text, finish))


def gemini_vectors(rows: list[list[float]]) -> httpx.Response:
    return httpx.Response(200, json={"embeddings": [{"values": r} for r in rows]})


def error(status: int, headers: dict[str, str] | None = None) -> httpx.Response:
    body = {"error": {"code": status, "message": f"scripted {status}", "status": "ERR"}}
    return httpx.Response(status, json=body, headers=headers or {})
