"""A small web site on 127.0.0.1 for the web-ingest tests: pages set per test, answered by
``http.server`` in a thread, with every request it received logged (path and headers)."""

from __future__ import annotations

import contextlib
import hashlib
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass
class Route:
    body: bytes = b""
    type: str = "text/html; charset=utf-8"
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    etag: bool = True  # send an ETag, and answer a matching If-None-Match with 304
    length: bool = True  # send Content-Length (else the body ends when the connection closes)


@dataclass
class Site:
    base: str
    routes: dict[str, Route] = field(default_factory=dict)
    log: list[tuple[str, dict[str, str]]] = field(default_factory=list)

    def page(self, path: str, html: str, **kw: object) -> None:
        self.routes[path] = Route(html.encode(), **kw)  # type: ignore[arg-type]

    def paths(self) -> list[str]:
        return [p for p, _ in self.log]

    def requests(self, path: str) -> list[dict[str, str]]:
        return [h for p, h in self.log if p == path]


def _handler(site: Site) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: object) -> None:
            pass

        def do_GET(self) -> None:  # noqa: N802 (http.server's name)
            site.log.append((self.path, {k.lower(): v for k, v in self.headers.items()}))
            route = site.routes.get(self.path)
            if route is None:
                self.send_response(404)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            tag = '"' + hashlib.sha256(route.body).hexdigest()[:16] + '"'
            if route.etag and self.headers.get("If-None-Match") == tag:
                self.send_response(304)
                self.send_header("ETag", tag)
                self.end_headers()
                return
            self.send_response(route.status)
            self.send_header("Content-Type", route.type)
            if route.etag:
                self.send_header("ETag", tag)
            for name, value in route.headers.items():
                self.send_header(name, value)
            if route.length:
                self.send_header("Content-Length", str(len(route.body)))
            else:
                self.send_header("Connection", "close")
                self.close_connection = True
            self.end_headers()
            with contextlib.suppress(BrokenPipeError, ConnectionResetError):  # it stopped reading
                self.wfile.write(route.body)

    return Handler


@contextmanager
def web_site(host: str = "127.0.0.1") -> Iterator[Site]:
    server = ThreadingHTTPServer((host, 0), _handler(site := Site("")))
    site.base = f"http://{host}:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield site
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)
