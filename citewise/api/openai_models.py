"""The bodies of the OpenAI-compatible routes (``completions.py``), in OpenAI's shapes with
citewise's extra fields. A request ignores the fields citewise has no use for (``temperature``,
``max_tokens``, ``user``, ...), as chat front-ends send them all; strings are checked as in
every request body (``models.Body``)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

from citewise.api.models import AskOut, Body, CitationOut

MAX_MESSAGES = 1000  # of a request; only the latest turns are read (``followup.MAX_TURNS``)
MAX_CONTENT_CHARS = 100_000


class Lenient(Body):
    """A body of OpenAI's API: fields citewise does not read are ignored, not refused."""

    model_config = ConfigDict(extra="ignore")


class ContentPartIn(Lenient):
    type: str = Field(..., max_length=64, description="Only `text` parts are read.")
    text: str | None = Field(None, max_length=MAX_CONTENT_CHARS)


class MessageIn(Lenient):
    role: Literal["system", "developer", "user", "assistant", "tool", "function"]
    content: (Annotated[str, Field(max_length=MAX_CONTENT_CHARS)]
              | Annotated[list[ContentPartIn], Field(max_length=100)] | None) = None


class ChatIn(Lenient):
    model: str = Field(..., min_length=1, max_length=64, examples=["docs"],
                       description="A knowledge base the key may use (`GET /v1/models`).")
    messages: list[MessageIn] = Field(
        ..., min_length=1, max_length=MAX_MESSAGES,
        description="The conversation: the last user message is the question, the user and "
        "assistant messages before it its history (the latest 20 are read); system messages "
        "are ignored (the citation contract is not the caller's to change).",
        examples=[[{"role": "user", "content": "How long do withdrawal symptoms last?"}]])
    stream: bool = Field(False, description="Server-sent `chat.completion.chunk` events, then "
                         "`data: [DONE]`.")
    sources: bool = Field(True, description="End an answer's content with a Markdown list of its "
                          "sources (`**Sources**`, then `- [n] title › section`, linked to the "
                          "passage's page where the service has a public URL), for chat "
                          "front-ends that show the content alone; `citations` carries them "
                          "either way. A refusal has none.")


class MessageOut(BaseModel):
    role: Literal["assistant"] = "assistant"
    content: str = Field(..., description="The answer with its [n] markers, or the refusal's "
                         "reason in plain words.")
    refusal: None = Field(None, description="Always null: a refusal is an ordinary message "
                          "(its object is `citewise`).")


class ChoiceOut(BaseModel):
    index: int = 0
    message: MessageOut
    finish_reason: Literal["stop"] = "stop"
    logprobs: None = None


class ChatOut(BaseModel):
    id: str
    object: Literal["chat.completion"] = "chat.completion"
    created: int
    model: str
    choices: list[ChoiceOut]
    usage: None = Field(None, description="Always null: citewise does not count tokens.")
    citations: list[CitationOut] = Field(..., description="The passages the [n] markers point "
                                         "to (empty in a refusal).")
    citewise: AskOut = Field(..., description="The whole answer or refusal, as "
                             "`POST /v1/kbs/{kb}/ask` returns it.")


class ModelOut(BaseModel):
    id: str = Field(..., description="The knowledge base's name.")
    object: Literal["model"] = "model"
    created: int = Field(..., description="When the knowledge base was made (Unix seconds).")
    owned_by: str = "citewise"


class ModelsOut(BaseModel):
    object: Literal["list"] = "list"
    data: list[ModelOut]


class OpenAIError(BaseModel):
    message: str
    type: str = Field(..., examples=["invalid_request_error"])
    param: str | None = None
    code: str | None = Field(None, examples=["model_not_found"])


class ChatProblem(BaseModel):
    """An error of the OpenAI-compatible routes: citewise's ``detail`` and OpenAI's ``error``
    (what OpenAI's SDKs and chat front-ends read), saying the same."""

    detail: str
    error: OpenAIError
