"""``ask``, ``search``, the passage behind a citation, and feedback on an answer.

``ask`` answers with the object ``citewise ask --json`` prints, or, when the request says
``Accept: text/event-stream`` or ``?stream=true`` (or ``"stream": true``), with server-sent
events, one per stage, each ``data`` one JSON object:

    event: retrieved   data: {"chunks": [chunk, ...], "timings": {...}}   (the context, best first)
    event: decision    data: {"answer": bool, "policy", "signal", "threshold", "reason"}
    event: answer      data: <the ask object>        (status "answered")
    event: refusal     data: <the ask object>        (status "refused")
    event: error       data: {"detail": "..."}       (instead of answer/refusal, if it failed)

The extractive generator does not stream tokens; a generator that does may add ``token``
events between ``decision`` and ``answer``. Questions are checked before the stream starts, so
an empty or oversized question is a plain 422.

What HTTP callers see differs from ``ask --json`` in two ways. ``query_id`` is always null (the
log's row ids are one sequence over every tenant, so they would tell how many questions all
tenants ask); ``feedback_token``, random and stored only as a hash, is the answer's reference
for feedback, and the first feedback on an answer stays (a second is 409). And a widget key
(public, in a web page) is not shown passages the gate did not answer from: in a refusal, and in
the ``retrieved`` event (sent before the decision), each chunk keeps its document, heading and
scores but its ``text`` and ``chunk_id`` are null, so it cannot open them as passages either;
a refusal's ``dropped`` sentences (a draft may quote a passage) keep their reason, not their text.
"""

from __future__ import annotations

import contextvars
import json
import queue
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

from fastapi import APIRouter, Depends, Path, Query, Request
from fastapi.responses import JSONResponse, StreamingResponse

from citewise.answer.questions import check_history, check_question
from citewise.api.compute import public_detail
from citewise.api.deps import KB_PATH, Caller, Scoped, askable_kb, get_caller, resolve, tenant_kb
from citewise.api.models import AskIn, AskOut, FeedbackIn, FeedbackOut, PassageOut, SearchIn, SearchOut
from citewise.errors import CitewiseError, FeedbackGivenError, KnowledgeBaseError, QueryLogError
from citewise.output import chunk_dict, to_dict
from citewise.records import Decision, Turn
from citewise.search.retrieval import Retrieved

router = APIRouter(prefix="/v1/kbs", tags=["asking"])
# a streamed ask waits here for its tenant's lane (``compute.py``): room for several tenants'
# waiting requests, so that one tenant's slow provider does not hold every streaming thread
_stream_pool = ThreadPoolExecutor(max_workers=32, thread_name_prefix="citewise-sse")


def _count(request: Request, s: Scoped, data: dict) -> None:
    request.app.state.metrics.asks.labels(f"{s.caller.key.tenant_id}/{s.name}", data["status"]).inc()


def _event(name: str, data: object) -> str:
    return f"event: {name}\ndata: {json.dumps(data, ensure_ascii=False)}\n\n"


def _withheld(chunk: dict) -> dict:
    return {**chunk, "chunk_id": None, "text": None}


def _shown(s: Scoped, data: dict) -> dict:
    """The ask object as an HTTP caller sees it (module docstring)."""
    data["query_id"] = None
    if s.caller.key.kind == "widget" and data["status"] != "answered":
        data["chunks"] = [_withheld(c) for c in data["chunks"]]
        data["dropped"] = [{**d, "sentence": None} for d in data["dropped"]]
    return data


def _stage(name: str, value: object, widget: bool = False) -> str:
    if isinstance(value, Retrieved):
        shown = [chunk_dict(c) for c in value.context]
        return _event(name, {"chunks": [_withheld(c) for c in shown] if widget else shown,
                             "timings": {k: round(v, 2) for k, v in value.timings.items()}})
    if isinstance(value, Decision):
        return _event(name, {"answer": value.answer, "policy": value.policy,
                             "signal": round(value.signal, 4),
                             "threshold": round(value.threshold, 4), "reason": value.reason})
    return _event(name, value)


def _stream(request: Request, s: Scoped, question: str, history: list[Turn]) -> Iterator[str]:
    events: queue.Queue[tuple[str, object] | None] = queue.Queue()

    def run() -> None:
        try:
            with s.compute():
                result = _shown(s, to_dict(s.engine().ask(
                    s.kb, question, on_stage=lambda n, v: events.put((n, v)), history=history)))
            _count(request, s, result)
            events.put(("answer" if result["status"] == "answered" else "refusal", result))
        except CitewiseError as e:
            events.put(("error", {"detail": public_detail(e)}))
        finally:
            events.put(None)

    _stream_pool.submit(contextvars.copy_context().run, run)  # with the request's departure
    widget = s.caller.key.kind == "widget"
    while (item := events.get()) is not None:
        yield _stage(*item, widget=widget)


@router.post("/{kb}/ask", response_model=AskOut,
             responses={200: {"content": {"text/event-stream": {}},
                              "description": "The answer or refusal; or stage events when streamed."}})
def ask(body: AskIn, request: Request, kb: str = KB_PATH, caller: Caller = Depends(get_caller),
        stream: bool = Query(False, description="Stream stage events (server-sent events).")):
    """Answer with citations, or refuse and say why and what was found (tenant or widget key).
    ``feedback_token`` is the answer's reference for feedback; ``query_id`` is always null. A
    widget key's refusal lists headings and scores, not passage texts. ``history`` (the
    conversation so far) makes a follow-up question standalone before retrieval."""
    s = resolve(caller, kb)  # here, not as a dependency: one worker-thread hand-off fewer
    question = check_question(body.question)
    history = list(check_history([Turn(t.role, t.content) for t in body.history]))
    if stream or body.stream or "text/event-stream" in request.headers.get("accept", ""):
        s.check_compute()  # a plain 429 or 422 now, rather than an error event later
        return StreamingResponse(_stream(request, s, question, history),
                                 media_type="text/event-stream",
                                 headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})
    with s.compute():
        data = _shown(s, to_dict(s.engine().ask(s.kb, question, history=history)))
    _count(request, s, data)
    return JSONResponse(data)


@router.post("/{kb}/search", response_model=SearchOut)
def search(body: SearchIn, s: Scoped = Depends(tenant_kb)) -> dict:
    """The chunks retrieval finds, with cosine, BM25 and fused scores; no answer, not logged."""
    with s.compute():
        found = s.engine().retrieve(s.kb, body.query, mode=body.mode, k=body.k)
    return {"query": body.query, "mode": body.mode, "chunks": [chunk_dict(c) for c in found.context]}


@router.get("/{kb}/passages/{chunk_id}", response_model=PassageOut)
def passage(chunk_id: str = Path(..., min_length=1, max_length=64),
            s: Scoped = Depends(askable_kb)) -> dict:
    """The passage a citation points to: its document, section and full text."""
    chunk = s.caller.services.store().chunk_by_id(s.kb, chunk_id)
    if chunk is None:
        raise KnowledgeBaseError(f"No passage {chunk_id!r} in knowledge base {s.name!r}")
    return {"kb": s.name, "chunk_id": chunk.id, "doc_id": chunk.doc_id, "title": chunk.title,
            "section": chunk.heading, "heading_path": list(chunk.section), "text": chunk.text}


@router.post("/{kb}/feedback", status_code=201, response_model=FeedbackOut)
def feedback(body: FeedbackIn, s: Scoped = Depends(askable_kb)) -> dict:
    """Was an answer helpful? Send the ``feedback_token`` the ask response carried. A wrong
    token is 404 like a missing knowledge base; the first feedback on an answer stays, and a
    second one is 409. ``id`` and ``query_id`` in the response are always null."""
    try:
        s.caller.services.store().add_token_feedback(s.kb, body.feedback_token, body.helpful,
                                                     body.comment)
    except FeedbackGivenError:
        raise
    except QueryLogError:
        raise KnowledgeBaseError(
            f"No answer with that feedback token in knowledge base {s.name!r}"
        ) from None
    return {"id": None, "query_id": None, "helpful": body.helpful}


__all__ = ["router"]
