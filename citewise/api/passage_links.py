"""Links to cited passages that a person can open from a chat front-end: ``GET /passages/{token}``.

A chat front-end (Open WebUI, AnythingLLM, LibreChat) shows an answer's Markdown and nothing
else, and a person clicking a source has no API key. Where the operator says where people reach
the service (``CITEWISE_PUBLIC_URL``), each source in a chat completion's list links to a page of
that one passage: its document's title, its section and its text. The link carries a token that
names the passage, its knowledge base and tenant, and an expiry, signed with a key derived from
the admin key (HMAC-SHA256); the signature is checked before the store is read, so a made-up or
altered link reads nothing, and a link opens the passage it was made for and no other, of no
other knowledge base. A changed admin key, an expired link or a passage since re-ingested away
is a page saying so, never another passage.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time
from datetime import UTC, datetime
from html import escape

from fastapi import APIRouter, Depends, Path
from fastapi.responses import HTMLResponse

from citewise.api.deps import get_services
from citewise.api.services import Services
from citewise.api.settings import Settings, get_settings
from citewise.errors import CitewiseError, PassageLinkError
from citewise.kb import KnowledgeBase

router = APIRouter()
LINK_DAYS = 90
MAX_TOKEN = 400
POLICY = ("default-src 'none'; style-src 'unsafe-inline'; base-uri 'none'; form-action 'none'; "
          "frame-ancestors 'none'")
HEADERS = {"Content-Security-Policy": POLICY, "Cache-Control": "private, max-age=300",
           "Referrer-Policy": "no-referrer", "X-Content-Type-Options": "nosniff"}
STYLE = """body{font:17px/1.6 system-ui,sans-serif;color:#1d2330;max-width:42rem;margin:3rem auto;
padding:0 1rem}.where{color:#5b6475;margin-top:-.5rem}.passage{white-space:pre-wrap;
border-left:4px solid #3b6fd8;padding:.25rem 1rem;background:#f6f8fc}footer{color:#5b6475;
font-size:14px;margin-top:2rem}"""


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _key(settings: Settings) -> bytes:
    admin = settings.require_admin_key().encode()
    return hmac.new(admin, b"citewise passage links v1", hashlib.sha256).digest()


def _signature(settings: Settings, payload: bytes) -> bytes:
    return hmac.new(_key(settings), payload, hashlib.sha256).digest()[:18]


def link(settings: Settings, kb: KnowledgeBase, chunk_id: str, now: float | None = None) -> str | None:
    """The public link to passage ``chunk_id`` of ``kb``, valid ``LINK_DAYS`` days; None when
    the service has no public URL."""
    if settings.public_url is None:
        return None
    expires = int((time.time() if now is None else now) + LINK_DAYS * 86400)
    payload = json.dumps([kb.tenant_id, kb.id, kb.name, chunk_id, expires],
                         separators=(",", ":")).encode()
    token = f"{_b64(payload)}.{_b64(_signature(settings, payload))}"
    return f"{settings.public_url}/passages/{token}"


def opened(settings: Settings, token: str, now: float | None = None) -> tuple[int, int, str, str]:
    """The tenant, knowledge base (id, name) and passage a token names, once its signature and
    expiry are checked."""
    body, _, signature = token.partition(".")
    try:
        payload, given = _unb64(body), _unb64(signature)
    except ValueError:
        payload, given = b"", b""
    if not given or not hmac.compare_digest(given, _signature(settings, payload)):
        raise PassageLinkError("This link to a passage is not valid: it may have been cut short "
                             "when copied. Ask the question again for a new one.")
    tenant, kb_id, name, chunk_id, expires = json.loads(payload)
    if (time.time() if now is None else now) > expires:
        end = datetime.fromtimestamp(expires, UTC)
        day = f"{end.day} {end:%B %Y}"
        raise PassageLinkError(f"This link to a passage expired on {day}. Ask the question "
                             "again for a new one.", 410)
    return tenant, kb_id, name, chunk_id


def _page(title: str, body: str) -> str:
    return (f'<!doctype html><html lang="en"><head><meta charset="utf-8">'
            f'<meta name="viewport" content="width=device-width, initial-scale=1">'
            f'<link rel="icon" href="data:,"><title>{escape(title)}</title>'
            f"<style>{STYLE}</style></head><body><main>{body}</main></body></html>")


@router.get("/passages/{token}", include_in_schema=False, response_class=HTMLResponse)
def passage_page(token: str = Path(..., max_length=MAX_TOKEN),
                 settings: Settings = Depends(get_settings),
                 services: Services = Depends(get_services)) -> HTMLResponse:
    """The page of one cited passage (module docstring)."""
    gone = PassageLinkError("This passage is no longer in its knowledge base: its document was "
                          "changed or removed since the answer. Ask the question again.")
    try:
        tenant, kb_id, name, chunk_id = opened(settings, token)
        kb = services.store().get_kb(name, tenant=tenant)
        chunk = services.store().chunk_by_id(kb, chunk_id) if kb.id == kb_id else None
        if chunk is None:
            raise gone
    except PassageLinkError as e:
        return HTMLResponse(_page("Passage not available", f"<h1>Passage not available</h1>"
                                  f"<p>{escape(str(e))}</p>"), e.status, headers=HEADERS)
    except CitewiseError:  # the knowledge base was deleted
        return HTMLResponse(_page("Passage not available", f"<h1>Passage not available</h1>"
                                  f"<p>{escape(str(gone))}</p>"), 404, headers=HEADERS)
    title = chunk.title or chunk.doc_id
    where = " › ".join(chunk.section) or chunk.heading
    return HTMLResponse(_page(title, (
        f"<h1>{escape(title)}</h1>" + (f'<p class="where">{escape(where)}</p>' if where else "")
        + f'<p class="passage">{escape(chunk.text)}</p>'
        f"<footer>A passage of the knowledge base {escape(kb.name)}, cited in an answer."
        f"</footer>")), headers=HEADERS)


__all__ = ["link", "opened", "router"]
