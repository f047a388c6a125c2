"""URLs as document ids, sites, and the hosts and addresses a fetch may connect to.

``normalise`` gives one spelling per page (scheme and host lower-cased, default port and
fragment dropped, non-ASCII percent-encoded), which is the page's document id. Two URLs are
on the same site when their hosts match, a leading ``www.`` aside; a redirect may move from
``http`` to ``https`` but not back.

``Hosts`` decides where a fetch may connect. The CLI fetches only what its user named, from
anywhere (``Hosts.any()``). The HTTP service fetches for tenants only from the hosts and ports
on its operator's list (``CITEWISE_WEB_HOSTS``): an entry is a host name or an IP address, or
``*.example.com`` for its subdomains, allowing ports 80 and 443, or any of these with
``:port`` (``[v6]:port``), allowing that port alone. A host alone once allowed every port:
``127.0.0.1`` let a tenant knock on the server's own database and cache, whose different
errors told what answered. A port not listed is refused before any connection, in words that
do not depend on what listens there, and checked again where sockets are made (``connect``),
so a redirect or link cannot reach one either. The host is resolved once and the connection
made to the address that was checked, so a DNS answer cannot change between check and
connect: an address that is private, loopback, link-local or otherwise not public is refused
unless the host that resolved to it is on the list by its exact name (never through a ``*.``
entry).
"""

from __future__ import annotations

import ipaddress
import socket
from dataclasses import dataclass
from urllib.parse import quote, urljoin, urlsplit, urlunsplit

from citewise.errors import ConfigError, DocumentError, FetchError, ForbiddenError
from citewise.storable import unprintable

MAX_URL_CHARS = 512  # a document id: the server stores keep ids up to 512 characters
WEB_PORTS = frozenset({80, 443})  # what an entry without a port allows
NOT_LISTED = "not a host and port this server fetches from; not fetched"
_HOST_CHARS = frozenset("abcdefghijklmnopqrstuvwxyz0123456789-._:*")
_SAFE_PATH = "/%:@!$&'()*+,;=-._~"
_SAFE_QUERY = _SAFE_PATH + "?"


def is_url(text: str) -> bool:
    """``text`` names a web page (``http://`` or ``https://``), not a file."""
    return text[:8].lower().startswith(("http://", "https://"))


def normalise(url: str, base: str | None = None) -> str:
    """The one spelling of ``url`` (resolved against ``base``), or ``DocumentError`` when it
    is not an http(s) URL citewise can fetch and store."""
    url = urljoin(base, url.strip()) if base else url.strip()
    if bad := unprintable(url):
        raise DocumentError(f"the URL holds {bad}")
    try:
        parts = urlsplit(url)
        port = parts.port
        host = (parts.hostname or "").encode("idna").decode("ascii").lower()
    except (ValueError, UnicodeError) as e:
        raise DocumentError(f"not a usable URL ({e})") from None
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https"):
        raise DocumentError(f"not an http(s) URL ({scheme or 'no scheme'})")
    if not host:
        raise DocumentError("the URL has no host")
    if parts.username or parts.password:
        raise DocumentError("the URL holds a user name or password; citewise sends none")
    shown = f"[{host}]" if ":" in host else host
    if port is not None and port != default_port(scheme):
        shown += f":{port}"
    path = quote(parts.path or "/", safe=_SAFE_PATH)
    query = quote(parts.query, safe=_SAFE_QUERY)
    out = urlunsplit((scheme, shown, path, query, ""))
    if len(out) > MAX_URL_CHARS:
        raise DocumentError(f"the URL is over {MAX_URL_CHARS} characters (a document id's limit)")
    return out


def site(url: str) -> str:
    """The site of a normalised URL: its host and port, less a leading ``www.``."""
    netloc = urlsplit(url).netloc
    return netloc.removeprefix("www.")


def same_site(start: str, url: str) -> bool:
    """``url`` is on ``start``'s site, and no less secure (https never goes back to http)."""
    if urlsplit(start).scheme == "https" and urlsplit(url).scheme != "https":
        return False
    return _site_host(start) == _site_host(url)


def _site_host(url: str) -> str:
    parts = urlsplit(url)
    host = (parts.hostname or "").removeprefix("www.")
    port = parts.port or default_port(parts.scheme)
    # http://example.com and https://example.com are one site: compare the host, and the port
    # only when it is not a scheme's default
    return host if port in (80, 443) else f"{host}:{port}"


def default_port(scheme: str) -> int:
    return {"http": 80, "https": 443}[scheme]


def _public(address: str) -> bool:
    ip = ipaddress.ip_address(address.split("%", 1)[0])
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return ip.is_global and not ip.is_multicast


@dataclass(frozen=True)
class Entry:
    """One entry of the list: a host (``*.example.com``: its subdomains) and its ports."""

    host: str
    ports: frozenset[int] = WEB_PORTS

    @classmethod
    def parse(cls, text: str) -> Entry:
        """``host``, ``host:port``, ``[v6]``, ``[v6]:port``, ``v6`` or ``*.example.com[:port]``;
        ``ConfigError`` for anything else."""
        entry = text.strip().lower()
        if entry.startswith("["):
            host, closed, rest = entry[1:].partition("]")
            port = rest[1:] if rest.startswith(":") else None if not rest else "bad"
            ok = bool(closed) and ":" in host
        else:
            host, port = entry.partition(":")[::2] if entry.count(":") == 1 else (entry, None)
            ok = True
        host = host.rstrip(".")
        wild = host.startswith("*.")
        ok = ok and bool(host) and set(host) <= _HOST_CHARS and "*" not in host[wild * 2:]
        if not ok or (port is not None and not (port.isdigit() and 0 < int(port) < 65536)):
            raise ConfigError(f"CITEWISE_WEB_HOSTS: {text.strip()!r} is not a host name or IP "
                              "address, *.example.com, or one of these with :port ([v6]:port)")
        return cls(host, frozenset({int(port)}) if port is not None else WEB_PORTS)

    def matches(self, host: str, port: int) -> bool:
        if port not in self.ports:
            return False
        return host == self.host or (self.host.startswith("*.") and host.endswith(self.host[1:]))


@dataclass(frozen=True)
class Hosts:
    """Where a fetch may connect: anywhere (``allowed`` is None), or the listed hosts and ports."""

    allowed: tuple[Entry, ...] | None

    @classmethod
    def any(cls) -> Hosts:
        return cls(None)

    @classmethod
    def listed(cls, entries: list[str]) -> Hosts:
        """The operator's entries (``Entry.parse``; ``ConfigError`` for one that is not)."""
        return cls(tuple(Entry.parse(e) for e in entries if e.strip()))

    def _named(self, host: str, port: int) -> bool:
        """``host`` is on the list by its exact name, with ``port``."""
        return self.allowed is None or any(e.host == host and port in e.ports for e in self.allowed)

    def permits(self, host: str, port: int) -> bool:
        """``host`` (lower case) is on the list with ``port``, by name or under a ``*.`` entry."""
        return self.allowed is None or any(e.matches(host, port) for e in self.allowed)

    def check(self, url: str) -> None:
        """``ForbiddenError`` unless a fetch of ``url`` (normalised) may be tried at all. The
        words are the same for every host and port not listed: nothing is connected to."""
        if self.allowed is None:
            return
        if not self.allowed:
            raise ForbiddenError("This server fetches no URLs: its operator has not listed any "
                                 "host in CITEWISE_WEB_HOSTS.")
        parts = urlsplit(url)
        host, port = parts.hostname or "", parts.port or default_port(parts.scheme)
        if not self.permits(host, port):
            shown = f"[{host}]" if ":" in host else host
            raise ForbiddenError(f"The address {shown}:{port} is not one this server fetches "
                                 "from; its operator lists hosts and ports in CITEWISE_WEB_HOSTS.")

    def connect(self, address: tuple[str, int], timeout: float | None = None,
                source_address: tuple[str, int] | None = None) -> socket.socket:
        """A connected socket to ``address`` (host, port): resolved once, every address
        checked, the connection made to a checked one (``socket.create_connection``'s
        signature, for ``http.client``)."""
        host, port = address
        if not self.permits(host.lower(), port):
            raise FetchError(NOT_LISTED)
        try:
            found = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        except OSError as e:
            raise FetchError(f"the host {host!r} cannot be resolved ({e.strerror or e})") from None
        if self.allowed is not None and not self._named(host.lower(), port):
            private = [str(sa[0]) for *_, sa in found if not _public(str(sa[0]))]
            if private:
                raise FetchError(f"the host {host!r} resolves to a non-public address "
                                    f"({private[0]}); not fetched")
        error: OSError | None = None
        for family, kind, proto, _, sockaddr in found:
            sock = socket.socket(family, kind, proto)
            try:
                sock.settimeout(timeout)
                if source_address:
                    sock.bind(source_address)
                sock.connect(sockaddr)
                return sock
            except OSError as e:
                error = e
                sock.close()
        raise FetchError(f"cannot connect to {host} ({error.strerror if error else 'no address'})")


def absolute(href: str, base: str) -> str | None:
    """A link's normalised URL, or None when it is not an http(s) page link."""
    if not href or href.startswith(("#", "mailto:", "javascript:", "tel:", "data:")):
        return None
    try:
        return normalise(href, base)
    except DocumentError:
        return None
