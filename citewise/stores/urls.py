"""Server store URLs: ``scheme://user:pass@host:port/db?option=value``, and their redaction:
``redact`` for one URL, ``mask`` for every URL in a text (a log line, a message)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from urllib.parse import parse_qsl, unquote, urlsplit

from citewise.errors import ConfigError

# scheme://user:password@ : the password is what comes between the user's colon and the @
_USERINFO = re.compile(r"(?P<head>\b[A-Za-z][A-Za-z0-9+.-]*://[^\s/:@]*):[^\s/@]*@")


@dataclass(frozen=True)
class ServerURL:
    """``scheme://user:pass@host:port/db?opt=v``; the password stays out of ``repr()``."""

    scheme: str
    user: str
    password: str = field(repr=False)
    host: str
    port: int | None
    database: str
    options: dict[str, str]

    @classmethod
    def parse(cls, url: str) -> ServerURL:
        parts = urlsplit(url)
        database = unquote(parts.path.lstrip("/"))
        if not parts.hostname or not database:
            raise ConfigError(
                f"Store URL {redact(url)!r} needs a host and a database: "
                f"{parts.scheme}://user:password@host:port/database"
            )
        try:
            port = parts.port
        except ValueError:
            raise ConfigError(f"Store URL {redact(url)!r} has a port that is not a number") from None
        return cls(parts.scheme, unquote(parts.username or ""), unquote(parts.password or ""),
                   parts.hostname, port, database, dict(parse_qsl(parts.query)))


def redact(url: str) -> str:
    """The URL with its password replaced by ``***``, for messages and ``store.url``."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@", 1)
    return parts._replace(netloc=netloc).geturl()


def mask(text: str) -> str:
    """``text`` with the password of every URL in it replaced by ``***``."""
    return _USERINFO.sub(r"\g<head>:***@", text) if "://" in text else text
