"""The HTTP service: ``create_app()`` builds the FastAPI app (see ``citewise/server.py``)."""

from citewise.api.app import create_app
from citewise.api.settings import Settings, get_settings

__all__ = ["Settings", "create_app", "get_settings"]
