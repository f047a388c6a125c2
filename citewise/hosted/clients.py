"""SDK clients for the hosted providers, and how each SDK's exceptions map to a ``Fault``.

The SDKs (``openai``, ``google-genai``; the ``hosted`` extra) are imported here, lazily, so
the default offline path never imports them. Each client sends through an HTTP client whose
sockets keep the provider call's deadline (``guarded.py``); ``http_client`` lets tests hand in
an ``httpx.Client`` with a mock transport. Nothing here opens a connection until a call is made.
"""

from __future__ import annotations

import json
from typing import Any

from citewise.errors import ConfigError
from citewise.hosted import TIMEOUT, Fault, retry_after
from citewise.hosted.guarded import guard

OPENAI_KEYS = ("OPENAI_API_KEY",)
COMPATIBLE_KEYS = ("OPENAI_COMPATIBLE_API_KEY",)
GEMINI_KEYS = ("GEMINI_API_KEY", "GOOGLE_API_KEY")


def _missing(sdk: str) -> ConfigError:
    return ConfigError(
        f"The {sdk!r} package is not installed; run `pip install 'citewise[hosted]'` (or `make install`)."
    )


def openai_client(api_key: str, base_url: str | None = None, http_client: Any = None) -> Any:
    try:
        import openai
    except ImportError:
        raise _missing("openai") from None
    http = guard(openai.DefaultHttpxClient() if http_client is None else http_client)
    return openai.OpenAI(api_key=api_key, base_url=base_url, max_retries=0, timeout=TIMEOUT,
                         http_client=http)


def _default_http_client() -> Any:
    """What the Gemini SDK sends through by default: ``httpx2`` where installed, else ``httpx``."""
    try:
        import httpx2
    except ImportError:
        import httpx

        return httpx.Client()
    return httpx2.Client()


def gemini_client(api_key: str, http_client: Any = None) -> Any:
    try:
        from google import genai
        from google.genai import types
    except ImportError:
        raise _missing("google-genai") from None
    if http_client is None:
        http_client = _default_http_client()
    options = types.HttpOptions(timeout=int(TIMEOUT * 1000), httpx_client=guard(http_client))
    return genai.Client(api_key=api_key, http_options=options)


def _status_fault(status: int, detail: str, headers: Any, key_names: tuple[str, ...]) -> Fault:
    if status == 429:
        return Fault(f"rate limited (429){detail}", True, retry_after(headers))
    if status >= 500:
        return Fault(f"the provider's server failed ({status}){detail}", True, retry_after(headers))
    if status in (401, 403):
        names = " or ".join(key_names) or "the API key variable"
        return Fault(f"the API key was rejected ({status}); check {names}", False)
    return Fault(f"the request was refused ({status}){detail}", False)


def _short(text: object, limit: int = 200) -> str:
    s = " ".join(str(text or "").split())
    return f": {s[:limit]}" if s else ""


def _network_errors() -> tuple[tuple[type[BaseException], ...], tuple[type[BaseException], ...]]:
    """Timeout and transport errors of httpx and of its fork httpx2, where installed (newer
    SDKs send through it, and its classes are not httpx's)."""
    import httpx

    timeouts: list[type[BaseException]] = [httpx.TimeoutException]
    transports: list[type[BaseException]] = [httpx.TransportError]
    try:
        import httpx2
    except ImportError:
        pass
    else:
        timeouts.append(httpx2.TimeoutException)
        transports.append(httpx2.TransportError)
    return tuple(timeouts), tuple(transports)


def classify_openai(e: BaseException, key_names: tuple[str, ...] = OPENAI_KEYS) -> Fault | None:
    import openai

    timeouts, transports = _network_errors()
    if isinstance(e, (openai.APITimeoutError, *timeouts)):
        return Fault("the request timed out", True)
    if isinstance(e, (openai.APIConnectionError, *transports)):
        return Fault("could not connect to the provider", True)
    if isinstance(e, openai.APIStatusError):
        return _status_fault(e.status_code, _short(e.message), e.response.headers, key_names)
    if isinstance(e, openai.APIResponseValidationError | json.JSONDecodeError | ValueError
                  | KeyError | TypeError | AttributeError):
        return Fault(f"the response was malformed{_short(e)}", True)
    return None


def classify_gemini(e: BaseException) -> Fault | None:
    from google.genai import errors

    timeouts, transports = _network_errors()
    if isinstance(e, timeouts):
        return Fault("the request timed out", True)
    if isinstance(e, transports):
        return Fault("could not connect to the provider", True)
    if isinstance(e, errors.APIError):
        headers = getattr(e.response, "headers", None)
        return _status_fault(int(e.code or 0), _short(e.message), headers, GEMINI_KEYS)
    if isinstance(e, json.JSONDecodeError | ValueError | KeyError | TypeError | AttributeError):
        return Fault(f"the response was malformed{_short(e)}", True)
    return None
