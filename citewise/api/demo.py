"""``/demo``: a page of this service with the chat widget on it, to try the widget before a site
embeds it. Off unless ``CITEWISE_DEMO_KEY`` names a widget key (then 404, as any unknown path);
on, it embeds the widget for that key's knowledge base, as a site would with one tag.

The page holds that key and no other. It is shown only while the key is an active widget key:
a tenant key (a secret, set here by mistake), a revoked or an unknown one is never put in a
page (503, saying what to set; the key is not named). Nor does it name the admin key or any
other. Its Content-Security-Policy lets the browser load nothing from another host, and the
page asks for nothing but the widget's script: no font, image or script of its own. The key
must list the origin the page is opened at (``http://127.0.0.1:8000``); the page says so when
it does not.
"""

from __future__ import annotations

import logging
from html import escape

from fastapi import APIRouter, Depends, Request
from fastapi.responses import HTMLResponse
from starlette.exceptions import HTTPException

from citewise.api.deps import get_services
from citewise.api.services import Services
from citewise.api.settings import Settings, get_settings

router = APIRouter()
log = logging.getLogger(__name__)

NOT_A_WIDGET_KEY = ("The demo page is not available: CITEWISE_DEMO_KEY is not an active widget "
                    "key. Make one with `citewise tenant key TENANT --widget --kb KB --origin "
                    "ORIGIN` (ORIGIN: where this page is opened, e.g. http://127.0.0.1:8000) "
                    "and set CITEWISE_DEMO_KEY to it.")
# the page's own style, the widget's (a <style> it adds) and its requests to this service
POLICY = ("default-src 'none'; script-src 'self'; style-src 'unsafe-inline'; img-src data:; "
          "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
HEADERS = {"Content-Security-Policy": POLICY, "Cache-Control": "no-store",
           "Referrer-Policy": "no-referrer", "X-Content-Type-Options": "nosniff"}
# the text on the left, clear of the widget's panel (360 px at the right) on a wide window
STYLE = """body{font:16px/1.5 system-ui,sans-serif;color:#1d2330;max-width:36rem;margin:3rem}
code,pre{font:13px/1.45 ui-monospace,monospace;background:#f3f5fa;border-radius:6px}
code{padding:1px 4px}
pre code{padding:0;background:none}
pre{padding:.75rem 1rem;white-space:pre-wrap;overflow-wrap:anywhere}
.warning{background:#fff8e6;border:1px solid #f0d48a;border-radius:8px;padding:.75rem 1rem}"""


def page(kb: str, key: str, origin: str, root: str, listed: bool) -> str:
    """The demo page for widget key ``key`` of knowledge base ``kb``, opened at ``origin``."""
    kb_, key_, origin_, root_ = (escape(v, quote=True) for v in (kb, key, origin, root))
    api = f' data-api="{root_}"' if root else ""  # behind a path prefix: the API is under it
    warning = "" if listed else (
        f'<p class="warning" role="alert">This widget key does not list this page\'s origin, '
        f"<code>{origin_}</code>, so the service will refuse its questions. Make a widget key "
        f"with <code>--origin {origin_}</code> and set <code>CITEWISE_DEMO_KEY</code> to it.</p>")
    return f"""<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<link rel="icon" href="data:,">
<title>citewise widget demo</title>
<style>{STYLE}</style>
</head>
<body>
<main>
<h1>The citewise chat widget</h1>
<p>This page embeds the chat widget for the knowledge base <strong>{kb_}</strong>. Open it
with the chat bubble at the bottom right and ask a question: an answer cites the passages it
rests on, and a question the documents do not cover is refused, with the closest topics they
do cover.</p>
{warning}
<p>A page of your own shows it with one tag and a widget key that lists the page's origin:</p>
<pre><code>&lt;script src="{origin_}{root_}/widget.js"
        data-kb="{kb_}" data-key="WIDGET KEY"
        data-title="Ask our docs" async&gt;&lt;/script&gt;</code></pre>
</main>
<script src="{root_}/widget.js" data-kb="{kb_}" data-key="{key_}" data-title="Ask {kb_}"{api}></script>
</body>
</html>
"""


@router.get("/demo", include_in_schema=False, response_class=HTMLResponse)
def demo(request: Request, settings: Settings = Depends(get_settings),
         services: Services = Depends(get_services)) -> HTMLResponse:
    """The widget demo page (module docstring)."""
    if settings.demo_key is None:
        raise HTTPException(404)  # off: as any path the service does not serve
    token = settings.demo_key.get_secret_value()
    key = services.keys.lookup(token, services.tenants().key_for_token)
    if key is None or key.kind != "widget" or not key.kb:
        log.warning("/demo not shown: CITEWISE_DEMO_KEY is %s", "a tenant key" if key else
                    "an unknown or revoked key")
        raise HTTPException(503, NOT_A_WIDGET_KEY)
    origin = f"{request.url.scheme}://{request.url.netloc}".lower()
    root = request.scope.get("root_path", "")
    return HTMLResponse(page(key.kb, token, origin, root, origin in key.origins), headers=HEADERS)


__all__ = ["router"]
