"""One HTTP GET at a time, within limits, with Python's own ``http.client``.

Every fetch keeps to these, and a page that passes one is a ``FetchError`` (a line in the
ingest report) with the reason:

- ``timeout`` seconds for the whole answer, connect, headers and body (``deadline.py``: a
  server dripping a byte at a time is cut off at it, "took over 60 s; not fetched"), and at
  most ``IDLE_S`` to connect or for the server to send anything at all;
- ``max_bytes`` of body, checked against ``Content-Length`` before reading and while reading,
  and again after a gzip body is inflated (a gzip bomb stops at the cap);
- only the media types the caller reads (``types``): anything else is refused before its body
  is read;
- redirects are followed only on the start URL's site (``urls.same_site``), at most
  ``MAX_REDIRECTS``, each target checked as a new URL (robots.txt included);
- a conditional request (``If-None-Match`` / ``If-Modified-Since``) when the caller knows the
  page's validators, so an unchanged page answers 304 with no body;
- connections go through ``Hosts.connect`` (``urls.py``), which the HTTP service narrows to its
  operator's hosts and public addresses.
"""

from __future__ import annotations

import http.client
import socket
import ssl
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from email.message import Message
from importlib.metadata import PackageNotFoundError, version
from urllib.parse import urlsplit

from citewise.errors import FetchError
from citewise.web.deadline import WATCHDOG, Watch
from citewise.web.urls import NOT_LISTED, Hosts, default_port, normalise, same_site

MAX_REDIRECTS = 5
IDLE_S = 15.0  # seconds to connect, or with nothing from the server, within the page's deadline
READ_BLOCK = 64 * 1024
MAX_VALIDATOR_CHARS = 200
try:
    USER_AGENT = f"citewise/{version('citewise')}"
except PackageNotFoundError:  # run from a source tree
    USER_AGENT = "citewise"


@dataclass(frozen=True)
class Validators:
    """What a server said identifies a page's version (empty when it said nothing)."""

    etag: str = ""
    last_modified: str = ""

    def headers(self) -> dict[str, str]:
        out = {}
        if self.etag:
            out["If-None-Match"] = self.etag
        if self.last_modified:
            out["If-Modified-Since"] = self.last_modified
        return out


@dataclass(frozen=True)
class Response:
    """A page as fetched: ``url`` is the one that answered (after redirects); ``status`` is
    200, or 304 (not modified: ``body`` is empty)."""

    url: str
    status: int
    media_type: str
    charset: str | None
    body: bytes
    validators: Validators


def _media(header: str | None) -> tuple[str, str | None]:
    message = Message()
    message["content-type"] = header or ""
    charset = message.get_param("charset")
    return message.get_content_type() if header else "", charset if isinstance(charset, str) else None


def _validator(value: str | None) -> str:
    value = (value or "").strip()
    return value if len(value) <= MAX_VALIDATOR_CHARS and value.isprintable() else ""


class Fetcher:
    """GETs within the limits above. ``allowed(url)`` is asked before every request (robots.txt
    and the crawl's own rules); ``wait(url)`` before it connects (the polite delay)."""

    def __init__(self, hosts: Hosts, timeout: float, max_bytes: int) -> None:
        self.hosts, self.timeout, self.max_bytes = hosts, timeout, max_bytes
        self.tls = ssl.create_default_context()

    def get(self, url: str, types: frozenset[str] | None, known: Callable[[str], Validators | None],
            allowed: Callable[[str], None], wait: Callable[[str], None]) -> Response:
        """``url`` fetched, redirects followed on its site. ``known(url)`` gives the stored
        validators of a URL (for a conditional request); ``allowed(url)`` raises
        ``DocumentError`` for a URL that may not be fetched. ``types``: the media types to read
        (None: any)."""
        start = url
        for _ in range(MAX_REDIRECTS + 1):
            allowed(url)
            wait(url)
            answer = self._request(url, known(url) or Validators(), types)
            if isinstance(answer, Response):
                return answer
            target = normalise(answer, url)
            if not same_site(start, target):
                raise FetchError(f"redirects to another site ({target}); not followed")
            url = target
        raise FetchError(f"over {MAX_REDIRECTS} redirects")

    def _connection(self, url: str, watch: Watch) -> tuple[http.client.HTTPConnection, str]:
        parts = urlsplit(url)
        if not self.hosts.permits(parts.hostname or "", parts.port or default_port(parts.scheme)):
            raise FetchError(NOT_LISTED)
        conn: http.client.HTTPConnection
        if parts.scheme == "https":
            conn = http.client.HTTPSConnection(parts.hostname or "", parts.port, timeout=self.timeout,
                                               context=self.tls)
        else:
            conn = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=self.timeout)
        # http.client's documented seam for how a connection is made (undeclared in typeshed):
        # every socket goes to an address the host check resolved and allowed, and is watched
        conn._create_connection = self._connector(watch)  # type: ignore[attr-defined]  # see above
        return conn, (parts.path or "/") + (f"?{parts.query}" if parts.query else "")

    def _connector(self, watch: Watch) -> Callable[..., socket.socket]:
        def connect(address: tuple[str, int], timeout: float | None = None,
                    source_address: tuple[str, int] | None = None) -> socket.socket:
            if watch.left() <= 0:
                raise TimeoutError
            sock = self.hosts.connect(address, min(IDLE_S, watch.left()), source_address)
            watch.attach(sock)
            return sock
        return connect

    def _request(self, url: str, validators: Validators,
                 types: frozenset[str] | None) -> Response | str:
        """The response, or the ``Location`` of a redirect, within the page's deadline."""
        accept = ", ".join([*sorted(types or ()), "*/*;q=0.1"])
        headers = {"User-Agent": USER_AGENT, "Accept-Encoding": "gzip", "Accept": accept,
                   **validators.headers()}
        late = FetchError(f"took over {self.timeout:g} s; not fetched")
        conn: http.client.HTTPConnection | None = None
        try:
            with WATCHDOG.watch(self.timeout) as watch:  # its sockets let go before the close
                try:
                    conn, target = self._connection(url, watch)
                    conn.request("GET", target, headers=headers)
                    with conn.getresponse() as reply:  # closed, read or not: it holds the socket
                        answer = self._answer(url, reply, validators, types)
                except (OSError, http.client.HTTPException, FetchError) as e:
                    if watch.expired or watch.left() <= 0:  # whatever the cut-off answer was
                        raise late from None
                    if isinstance(e, FetchError):
                        raise
                    raise FetchError(f"cannot be fetched ({_reason(e)})") from None
                if watch.expired:  # an answer ended by its connection would look whole
                    raise late
                return answer
        finally:
            if conn is not None:
                conn.close()

    def _answer(self, url: str, reply: http.client.HTTPResponse, validators: Validators,
                types: frozenset[str] | None) -> Response | str:
        if reply.status in (301, 302, 303, 307, 308) and reply.getheader("Location"):
            return reply.getheader("Location", "")
        if reply.status == 304 and validators.headers():
            return Response(url, 304, "", None, b"", validators)
        if reply.status != 200:
            raise FetchError(f"HTTP {reply.status} {reply.reason}".rstrip(), status=reply.status)
        media, charset = _media(reply.getheader("Content-Type"))
        if types and media not in types:
            raise FetchError(f"a {media or 'page with no Content-Type'}, not a type citewise "
                             f"reads here ({', '.join(sorted(types))})")
        body = self._body(reply)
        found = Validators(_validator(reply.getheader("ETag")),
                           _validator(reply.getheader("Last-Modified")))
        return Response(url, 200, media, charset, body, found)

    def _body(self, reply: http.client.HTTPResponse) -> bytes:
        cap = self.max_bytes
        over = FetchError(f"over the {cap:,}-byte page limit; not read further")
        length = reply.getheader("Content-Length")
        if length and length.isdigit() and int(length) > cap:
            raise over
        encoding = (reply.getheader("Content-Encoding") or "identity").strip().lower()
        if encoding not in ("identity", "gzip", "x-gzip"):
            raise FetchError(f"sent with Content-Encoding {encoding!r}, which citewise does not read")
        inflate = zlib.decompressobj(16 + zlib.MAX_WBITS) if encoding != "identity" else None
        parts: list[bytes] = []
        size = 0
        while block := reply.read(READ_BLOCK):
            if inflate is not None:
                try:
                    block = inflate.decompress(block, cap + 1 - size)
                except zlib.error:
                    raise FetchError("its gzip body is corrupt") from None
                if inflate.unconsumed_tail:
                    raise over
            size += len(block)
            if size > cap:
                raise over
            parts.append(block)
        return b"".join(parts)



def _reason(error: OSError | http.client.HTTPException) -> str:
    if isinstance(error, TimeoutError):
        return "timed out"
    if isinstance(error, ssl.SSLError):
        return f"TLS failed ({error.reason})"
    return getattr(error, "strerror", None) or type(error).__name__
