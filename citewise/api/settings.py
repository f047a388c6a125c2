"""The service's settings, read from ``CITEWISE_*`` environment variables (or a ``.env`` file).

Routes take them with ``Depends(get_settings)``; tests swap them with
``app.dependency_overrides[get_settings]``. Nothing here is a global mutable object.
"""

from __future__ import annotations

import os
from functools import lru_cache

from pydantic import Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict

from ..embedders import DEFAULT_EMBEDDER
from ..errors import ConfigError
from ..stores import DEFAULT_DB

ADMIN_KEY_HELP = (
    "The service needs an admin key to create tenants and their API keys: set the environment "
    "variable CITEWISE_ADMIN_KEY to a long random secret, e.g. "
    "`export CITEWISE_ADMIN_KEY=$(python -c 'import secrets; print(secrets.token_urlsafe(32))')`"
)


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="CITEWISE_", env_file=".env", extra="ignore")

    db: str = Field(DEFAULT_DB, description="The store: a SQLite path or URL.")
    admin_key: SecretStr | None = Field(None, description="Creates tenants and keys; required.")
    embedder: str = Field(DEFAULT_EMBEDDER, description="Embedder for knowledge bases made over HTTP.")
    max_upload_bytes: int = Field(10 * 1024 * 1024, ge=1, description="Largest file accepted.")
    max_files: int = Field(50, ge=1, description="Most files in one upload request.")
    rate_per_minute: int = Field(120, ge=1, description="Default request rate of a new key.")
    metrics_public: bool = Field(False, description="Serve /metrics without the admin key.")
    compute_slots: int = Field(default_factory=lambda: os.cpu_count() or 2, ge=1,
                               description="Asks, searches and ingests that embed at once; the "
                               "rest wait their turn instead of fighting over the cores.")

    def require_admin_key(self) -> str:
        if self.admin_key is None or len(self.admin_key.get_secret_value()) < 16:
            raise ConfigError(ADMIN_KEY_HELP + " (at least 16 characters).")
        return self.admin_key.get_secret_value()


@lru_cache
def get_settings() -> Settings:
    return Settings()
