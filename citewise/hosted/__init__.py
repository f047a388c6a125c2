"""What hosted providers share: keys from the environment, spec parsing, bounded retries.

Every call to a provider goes through ``retrying``: a fault that may pass (a timeout, a lost
connection, 429, 5xx, a malformed or empty body) is retried up to ``ATTEMPTS`` times in all,
waiting ``BACKOFF * 2**attempt`` seconds (capped at ``MAX_WAIT``) or what the server's
``Retry-After`` asks, if that is longer; a fault that will not pass (a rejected key, a bad
request, a safety refusal) is raised at once. Either way the caller gets one citewise error
whose message says what happened and how many attempts were made. The sleep function is an
argument so tests run without waiting. The provider SDKs' own retries are turned off, so
there is one retry policy, this one.

The HTTP service sets ``limits`` around its work: a total deadline for each call, its retries
and waits included, and a context manager the call runs inside (there the service lends its
compute slot to others: a provider's network wait needs no core). A stream's deadline covers
it from its first request to its last piece. The deadline holds for every byte of the
exchange: the SDKs' clients read through ``guarded.py``, whose sockets wait no longer than
what is left of the ``current_call`` (each request's timeout is that too). The service also
says, with ``leaving``, the event set when the request's client has gone: a call then stops
at once (within ``guarded.TICK``) with an error that says so, and is not retried. Outside
``limits`` (the CLI) there is no deadline but the attempts.
"""

from __future__ import annotations

import email.utils
import os
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager, nullcontext
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TypeVar

from citewise.errors import CitewiseError, ConfigError

ATTEMPTS = 4
BACKOFF = 1.0
MAX_WAIT = 60.0
TIMEOUT = 60.0

T = TypeVar("T")
Sleep = Callable[[float], None]


@dataclass(frozen=True)
class Fault:
    """What went wrong in one attempt, and whether another attempt may succeed."""

    message: str
    retry: bool
    retry_after: float | None = None


Classify = Callable[[BaseException], "Fault | None"]


@dataclass(frozen=True)
class Limits:
    """What the caller's context asks of provider calls (see the module docstring)."""

    deadline: float | None = None
    waiting: Callable[[], AbstractContextManager[object]] = nullcontext


@dataclass(frozen=True)
class Call:
    """The provider call under way: when it must be over, and the event set when its caller
    has gone (either may be None)."""

    end: float | None = None
    gone: threading.Event | None = None

    def left(self) -> float | None:
        """Seconds until the deadline (negative once past it); None without one."""
        return None if self.end is None else self.end - time.monotonic()

    def stopped(self) -> bool:
        return self.gone is not None and self.gone.is_set()


_limits: ContextVar[Limits | None] = ContextVar("citewise_provider_limits", default=None)
_gone: ContextVar[threading.Event | None] = ContextVar("citewise_caller_gone", default=None)
_call: ContextVar[Call | None] = ContextVar("citewise_provider_call", default=None)
GONE = "the caller went away"


@contextmanager
def limits(deadline: float | None = None,
           waiting: Callable[[], AbstractContextManager[object]] = nullcontext) -> Iterator[None]:
    """Provider calls made inside take ``deadline`` seconds at most and run inside ``waiting()``."""
    token = _limits.set(Limits(deadline, waiting))
    try:
        yield
    finally:
        _limits.reset(token)


@contextmanager
def leaving(gone: threading.Event) -> Iterator[None]:
    """Provider calls made inside stop when ``gone`` is set (the caller has left)."""
    token = _gone.set(gone)
    try:
        yield
    finally:
        _gone.reset(token)


def current_call() -> Call | None:
    """The provider call this thread is making (inside ``retrying``), if any."""
    return _call.get()


def request_timeout() -> float | None:
    """The timeout of the next request under a deadline (what is left of it); None without one."""
    call = _call.get()
    left = None if call is None else call.left()
    return None if left is None else max(0.001, min(TIMEOUT, left))


def _new_call() -> Call:
    rules = _limits.get() or Limits()
    end = None if rules.deadline is None else time.monotonic() + rules.deadline
    return Call(end, _gone.get())


@contextmanager
def _calling(call: Call) -> Iterator[None]:
    token = _call.set(call)
    try:
        yield
    finally:
        _call.reset(token)


class Unusable(Exception):
    """Raised inside a call when a 200 response cannot be used (empty, malformed, refused)."""

    def __init__(self, message: str, retry: bool = True) -> None:
        super().__init__(message)
        self.fault = Fault(message, retry)


def api_key(provider: str, names: tuple[str, ...], required: bool = True) -> str | None:
    """The first of the environment variables ``names`` that is set; an error naming them all."""
    for name in names:
        value = os.environ.get(name, "").strip()
        if value:
            return value
    if required:
        raise ConfigError(
            f"{provider} needs an API key: set the {' or '.join(names)} environment variable."
        )
    return None


def compatible_spec(kind: str, arg: str) -> tuple[str, str]:
    """``URL#MODEL`` of an ``openai-compatible:`` spec, checked."""
    url, _, model = arg.partition("#")
    if not url.startswith(("http://", "https://")) or not model:
        raise ConfigError(
            f"openai-compatible {kind} spec must be openai-compatible:URL#MODEL, e.g. "
            f"openai-compatible:http://localhost:11434/v1#llama3.1, not {arg!r}"
        )
    return url.rstrip("/"), model


def model_name(kind: str, provider: str, arg: str, example: str) -> str:
    if not arg:
        raise ConfigError(f"the {provider} {kind} needs a model: {provider}:{example}")
    return arg


def retry_after(headers: Mapping[str, str] | None) -> float | None:
    """Seconds a server asked us to wait (``retry-after-ms``, ``Retry-After`` seconds or date)."""
    if not headers:
        return None
    ms = headers.get("retry-after-ms")
    if ms:
        try:
            return max(0.0, float(ms) / 1000)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        when = email.utils.parsedate_to_datetime(value) if value.strip() else None
        return max(0.0, when.timestamp() - time.time()) if when else None


def wait(attempt: int, fault: Fault) -> float:
    backoff = min(MAX_WAIT, BACKOFF * 2**attempt)
    return min(MAX_WAIT, max(backoff, fault.retry_after or 0.0))


def _fail_or_wait(e: Exception, attempt: int, attempts: int, classify: Classify,
                  error: type[CitewiseError], what: str, sleep: Sleep, started: bool = False,
                  call: Call | None = None) -> None:
    """Raise ``error`` (or ``e`` itself, when it is not a provider fault) or sleep before the next try."""
    fault = e.fault if isinstance(e, Unusable) else classify(e)
    if fault is None:
        raise e
    if call is not None and call.stopped():
        raise error(f"{what} stopped: {GONE}") from e
    pause = wait(attempt, fault)
    left = None if call is None else call.left()
    late = left is not None and pause >= left
    if started or not fault.retry or attempt == attempts - 1 or late:
        where = "mid-stream" if started else f"after {attempt + 1} attempt{'s' if attempt else ''}"
        deadline = " (the deadline left no time for another)" if late and fault.retry else ""
        raise error(f"{what} failed {where}: {fault.message}{deadline}") from e
    sleep(pause)


def _check_gone(call: Call, error: type[CitewiseError], what: str) -> None:
    if call.stopped():
        raise error(f"{what} stopped: {GONE}")


def retrying(call: Callable[[], T], classify: Classify, error: type[CitewiseError], what: str,
             sleep: Sleep = time.sleep, attempts: int = ATTEMPTS) -> T:
    """``call()``, retried on passing faults; ``error`` with a clear message when it gives up."""
    this = _new_call()
    with _calling(this), (_limits.get() or Limits()).waiting():
        for attempt in range(attempts):
            _check_gone(this, error, what)
            try:
                return call()
            except Exception as e:  # noqa: BLE001 - classify decides what is a provider fault
                _fail_or_wait(e, attempt, attempts, classify, error, what, sleep, call=this)
    raise AssertionError("unreachable")


def retrying_stream(open_stream: Callable[[], Iterator[str]], classify: Classify,
                    error: type[CitewiseError], what: str, sleep: Sleep = time.sleep,
                    attempts: int = ATTEMPTS) -> Iterator[str]:
    """Text pieces of a stream. A fault before the first piece is retried like ``retrying``;
    one after it ends the stream with ``error`` (text already given cannot be taken back).
    The deadline runs from the first request to the last piece; the call is this thread's
    ``current_call`` only while a piece is read, never while the consumer holds one."""
    this = _new_call()
    for attempt in range(attempts):
        _check_gone(this, error, what)
        started = False
        try:
            pieces = open_stream()
            while True:
                with _calling(this):
                    piece = next(pieces, None)
                if piece is None:
                    return
                started = True
                yield piece
        except Exception as e:  # noqa: BLE001
            _fail_or_wait(e, attempt, attempts, classify, error, what, sleep, started, this)
