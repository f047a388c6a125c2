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
and waits included (each request's timeout is what is left of it), and a context manager the
call runs inside (there the service lends its compute slot to others: a provider's network
wait needs no core). Outside ``limits`` (the CLI) there is no deadline but the attempts.
"""

from __future__ import annotations

import email.utils
import os
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager, nullcontext
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TypeVar

from .errors import CitewiseError, ConfigError

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


_limits: ContextVar[Limits | None] = ContextVar("citewise_provider_limits", default=None)
_call_end: ContextVar[float | None] = ContextVar("citewise_provider_call_end", default=None)


@contextmanager
def limits(deadline: float | None = None,
           waiting: Callable[[], AbstractContextManager[object]] = nullcontext) -> Iterator[None]:
    """Provider calls made inside take ``deadline`` seconds at most and run inside ``waiting()``."""
    token = _limits.set(Limits(deadline, waiting))
    try:
        yield
    finally:
        _limits.reset(token)


def request_timeout() -> float | None:
    """The timeout of the next request under a deadline (what is left of it); None without one."""
    end = _call_end.get()
    return None if end is None else max(0.001, min(TIMEOUT, end - time.monotonic()))


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
                  end: float | None = None) -> None:
    """Raise ``error`` (or ``e`` itself, when it is not a provider fault) or sleep before the next try."""
    fault = e.fault if isinstance(e, Unusable) else classify(e)
    if fault is None:
        raise e
    pause = wait(attempt, fault)
    late = end is not None and time.monotonic() + pause >= end
    if started or not fault.retry or attempt == attempts - 1 or late:
        where = "mid-stream" if started else f"after {attempt + 1} attempt{'s' if attempt else ''}"
        deadline = " (the deadline left no time for another)" if late and fault.retry else ""
        raise error(f"{what} failed {where}: {fault.message}{deadline}") from e
    sleep(pause)


def retrying(call: Callable[[], T], classify: Classify, error: type[CitewiseError], what: str,
             sleep: Sleep = time.sleep, attempts: int = ATTEMPTS) -> T:
    """``call()``, retried on passing faults; ``error`` with a clear message when it gives up."""
    rules = _limits.get() or Limits()
    end = None if rules.deadline is None else time.monotonic() + rules.deadline
    token = _call_end.set(end)
    try:
        with rules.waiting():
            for attempt in range(attempts):
                try:
                    return call()
                except Exception as e:  # noqa: BLE001 - classify decides what is a provider fault
                    _fail_or_wait(e, attempt, attempts, classify, error, what, sleep, end=end)
    finally:
        _call_end.reset(token)
    raise AssertionError("unreachable")


def retrying_stream(open_stream: Callable[[], Iterator[str]], classify: Classify,
                    error: type[CitewiseError], what: str, sleep: Sleep = time.sleep,
                    attempts: int = ATTEMPTS) -> Iterator[str]:
    """Text pieces of a stream. A fault before the first piece is retried like ``retrying``;
    one after it ends the stream with ``error`` (text already given cannot be taken back)."""
    for attempt in range(attempts):
        started = False
        try:
            for piece in open_stream():
                started = True
                yield piece
            return
        except Exception as e:  # noqa: BLE001
            _fail_or_wait(e, attempt, attempts, classify, error, what, sleep, started)
