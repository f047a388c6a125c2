"""A small web site on 127.0.0.1 for the web-ingest tests: pages set per test, answered by
``http.server`` in a thread, with every request it received logged (path and headers); and a
server that drips its answer a byte at a time (``drip_server``), as a hostile one would."""

from __future__ import annotations

import contextlib
import datetime
import hashlib
import ipaddress
import socket
import ssl
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path


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


@dataclass
class Drip:
    port: int
    connections: int = 0  # accepted so far
    most: int = 0  # the most open at once
    open: int = 0


@contextmanager
def drip_server(drip: bytes, every: float, head: bytes = b"",
                tls: ssl.SSLContext | None = None) -> Iterator[Drip]:
    """A server on 127.0.0.1 that reads a request, answers ``head`` at once, then ``drip`` one
    byte every ``every`` seconds (over TLS with ``tls``: a record each), then closes. Each byte
    comes well within any read timeout, so only a deadline on the whole answer ends it."""
    stop = threading.Event()
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.1)
    found = Drip(listener.getsockname()[1])
    lock = threading.Lock()

    def answer(conn: socket.socket) -> None:
        try:
            # the client gave up: that is the point
            with contextlib.suppress(OSError), contextlib.ExitStack() as stack:
                stack.enter_context(conn)
                conn.settimeout(30)
                if tls is not None:
                    conn = stack.enter_context(tls.wrap_socket(conn, server_side=True))
                conn.recv(65536)
                conn.sendall(head)
                for i in range(len(drip)):
                    if stop.wait(every):
                        return
                    conn.sendall(drip[i:i + 1])
        finally:
            with lock:
                found.open -= 1

    def accept() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            with lock:
                found.connections += 1
                found.open += 1
                found.most = max(found.most, found.open)
            threading.Thread(target=answer, args=(conn,), daemon=True).start()

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield found
    finally:
        stop.set()
        thread.join(5)
        listener.close()


def self_signed(folder: Path) -> tuple[ssl.SSLContext, ssl.SSLContext]:
    """A certificate for 127.0.0.1: the server's TLS context, and a client's that trusts it."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(days=1))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName(
                [x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(key, hashes.SHA256()))
    (folder / "cert.pem").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    (folder / "key.pem").write_bytes(key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption()))
    server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server.load_cert_chain(folder / "cert.pem", folder / "key.pem")
    return server, ssl.create_default_context(cafile=str(folder / "cert.pem"))
