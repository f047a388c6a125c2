"""Error bodies: a request that fails validation is a 422 ``{"detail": "field: message"}`` that
never echoes the input (pydantic's errors carry it, megabytes of it at times), and every error
status a route can answer is in the OpenAPI schema, with the ``{"detail": ...}`` body it has.
Path parameters no store can hold are such a 422 too (``plain_path``, every route's first
dependency).
"""

from __future__ import annotations

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse

from citewise.api.models import Problem
from citewise.errors import (
    AccessError,
    AlreadyExistsError,
    CitewiseError,
    ConfigError,
    DocumentError,
    EmbedderError,
    FeedbackGivenError,
    ForbiddenError,
    GenerationError,
    JobError,
    KnowledgeBaseError,
    QueryError,
    RateLimitError,
    StoreError,
    TenantError,
    TenantExistsError,
    UnsupportedTypeError,
    UploadTooLargeError,
)
from citewise.storable import unprintable

MAX_DETAIL = 500  # characters of a 422 detail; the rest is cut with "..."
_WHERE = {"body", "query", "path", "header", "cookie"}

STATUS: list[tuple[type[CitewiseError], int]] = [  # first match wins: subclasses first
    (AlreadyExistsError, 409), (TenantExistsError, 409), (FeedbackGivenError, 409),
    (KnowledgeBaseError, 404), (TenantError, 404), (JobError, 404), (RateLimitError, 429),
    (ForbiddenError, 403),
    (AccessError, 401), (UploadTooLargeError, 413), (UnsupportedTypeError, 415),
    (QueryError, 422), (DocumentError, 422), (ConfigError, 422),
    (StoreError, 503), (EmbedderError, 503), (GenerationError, 502),
]
ERRORS = {
    400: "a request the service cannot carry out (a body it cannot parse)",
    401: "no API key, or an unknown or revoked one",
    403: "a key not allowed this request or origin",
    404: "no such knowledge base, tenant, document, passage, question or job",
    409: "one of that name already exists",
    413: "the request body is over the route's limit (a file over the upload limit)",
    422: "a field that is missing, of the wrong type or not valid",
    429: "the key is over its request rate; retry after Retry-After seconds",
    502: "the answer generator failed",
    503: "the store or the embedding model is unavailable",
}


def status_of(error: CitewiseError) -> int:
    """The HTTP status of a citewise error: its first kind in ``STATUS``, else 400."""
    return next((code for kind, code in STATUS if isinstance(error, kind)), 400)


def field_of(loc: tuple | list) -> str:
    parts = [str(p) for p in loc]
    if parts and parts[0] in _WHERE:
        parts = parts[1:] or parts
    return ".".join(parts) or "body"


def _message(error: dict) -> str:
    loc = error.get("loc", ())
    if error.get("type") == "json_invalid":  # loc is ("body", offset): say where, not "1: ..."
        why = str((error.get("ctx") or {}).get("error", "")).split(":")[0]
        at = loc[-1] if loc and isinstance(loc[-1], int) else None
        where = f" at character {at}" if at is not None else ""
        return f"body: not valid JSON{where}" + (f" ({why})" if why else "")
    return f"{field_of(loc)}: {error.get('msg', 'not valid')}"


def validation_detail(errors: list[dict]) -> str:
    """``field: message`` per error, joined by ``; ``; only locations and messages."""
    detail = "; ".join(_message(e) for e in errors)
    return detail if len(detail) <= MAX_DETAIL else detail[: MAX_DETAIL - 3] + "..."


async def validation_error(request: Request, error: RequestValidationError) -> JSONResponse:
    return JSONResponse({"detail": validation_detail(list(error.errors()))}, status_code=422)


async def internal_error(request: Request, error: Exception) -> JSONResponse:
    """A failure no handler knew (a bug): the same ``{"detail": ...}`` shape as every other
    error, saying nothing of it; the server log has the traceback (uvicorn logs it)."""
    return JSONResponse({"detail": "Internal error; the server's log has the details."},
                        status_code=500)


async def plain_path(request: Request) -> None:
    """Every route's first dependency: a path parameter holding a NUL, a control character or a
    lone surrogate is a 422 before any store sees it (PostgreSQL refuses NUL in text). Async:
    it reads no store, and a plain function would take a worker thread for every request."""
    for name, value in request.path_params.items():
        if bad := unprintable(value):
            raise RequestValidationError([{"loc": ("path", name), "type": "value_error",
                                           "msg": f"holds {bad}"}])


def _codes(path: str, operation: dict) -> set[int]:
    codes = {422} if operation.get("parameters") else set()
    if "requestBody" in operation:
        codes |= {413, 422}
    if path.startswith("/v1/"):
        codes |= {400, 401, 403, 429, 503}
    if "{" in path:
        codes.add(404)
    if "201" in operation["responses"]:
        codes.add(409)
    if path.endswith("/ask"):
        codes.add(502)
    if path == "/metrics":
        codes |= {401, 403}
    return codes


def add_errors(schema: dict) -> dict:
    """Every error status an operation can answer, with the ``{"detail": ...}`` body (a route's
    own entry for a status wins, except FastAPI's 422 list of errors, which no route answers)."""
    problem = {"$ref": "#/components/schemas/Problem"}
    components = schema.setdefault("components", {}).setdefault("schemas", {})
    components.setdefault("Problem", Problem.model_json_schema())
    for path, operations in schema.get("paths", {}).items():
        for operation in operations.values():
            responses = operation["responses"]
            default_422 = responses.get("422", {}).get("content", {}).get("application/json", {})
            if default_422.get("schema", {}).get("$ref", "").endswith("/HTTPValidationError"):
                del responses["422"]
            for code in sorted(_codes(path, operation)):
                responses.setdefault(str(code), {"description": ERRORS[code]})
            for code, response in responses.items():  # a route's own error entry: its body too
                if int(code) >= 400:
                    response.setdefault("content", {"application/json": {"schema": problem}})
    for unused in ("HTTPValidationError", "ValidationError"):
        components.pop(unused, None)
    return schema


def document_errors(app: FastAPI) -> None:
    """Make ``app.openapi()`` describe every error status (``add_errors``)."""
    made = app.openapi

    def openapi() -> dict:
        return add_errors(made())

    app.openapi = openapi  # type: ignore[method-assign]  # FastAPI documents replacing the method
