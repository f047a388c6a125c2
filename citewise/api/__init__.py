"""The HTTP service: ``create_app()`` builds the FastAPI app (see ``citewise/server.py``)."""

from .app import create_app
from .settings import Settings, get_settings

__all__ = ["Settings", "create_app", "get_settings"]
