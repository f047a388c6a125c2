"""The HTTP service's entry point: ``uvicorn --factory citewise.server:create_app``.

The app itself lives in ``citewise/api/``: ``settings`` (``CITEWISE_*`` variables), ``deps``
(keys, tenants, the knowledge base a caller may reach), ``admin``, ``kbs``, ``ask`` (the
routes), ``metrics`` (Prometheus and CORS). ``citewise serve`` runs it.
"""

from __future__ import annotations

from citewise.api import Settings, create_app, get_settings

__all__ = ["Settings", "create_app", "get_settings"]
