"""The service's settings, read from ``CITEWISE_*`` environment variables (or a ``.env`` file).

Routes take them with ``Depends(get_settings)``; tests swap them with
``app.dependency_overrides[get_settings]``. Nothing here is a global mutable object.
"""

from __future__ import annotations

import importlib.util
import os
from functools import lru_cache
from typing import Annotated

from pydantic import Field, SecretStr, field_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from ..embedders import DEFAULT_EMBEDDER
from ..errors import ConfigError
from ..generators import DEFAULT_GENERATOR
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
    embedders: Annotated[list[str], NoDecode] = Field(
        default_factory=list, description="Embedder specs a tenant may choose (comma-separated), "
        "besides CITEWISE_EMBEDDER; a tenant never gives a URL of its own.")
    generators: Annotated[list[str], NoDecode] = Field(
        default_factory=lambda: [DEFAULT_GENERATOR],
        description="Generator specs a knowledge base may use (comma-separated); the first is "
        "the one a new knowledge base gets.")
    provider_deadline_s: float = Field(15.0, gt=0, description="Seconds one hosted-provider call "
                                       "may take in all, its retries included.")
    max_upload_bytes: int = Field(10 * 1024 * 1024, ge=1, description="Largest file accepted.")
    max_files: int = Field(50, ge=1, description="Most files in one upload request.")
    rate_per_minute: int = Field(120, ge=1, description="Default request rate of a new key.")
    metrics_public: bool = Field(False, description="Serve /metrics without the admin key.")
    compute_slots: int = Field(default_factory=lambda: os.cpu_count() or 2, ge=1,
                               description="Asks, searches and ingests that embed at once; the "
                               "rest wait their turn instead of fighting over the cores.")
    tenant_slots: int | None = Field(None, ge=1, description="Requests of one tenant running at "
                                     "once [default: half the compute slots, at least 1].")
    tenant_queue: int = Field(4, ge=0, description="Requests of one tenant waiting for its turn; "
                              "more at once are answered 429.")
    max_body_bytes: int = Field(1024 * 1024, ge=1024, description="Largest request body of a "
                                "JSON route; an upload may be max_files x max_upload_bytes.")
    web_hosts: Annotated[list[str], NoDecode] = Field(
        default_factory=list, description="Hosts whose pages tenants may have fetched into their "
        "knowledge bases (POST /v1/kbs/{kb}/urls), comma-separated: names or IP addresses, or "
        "*.example.com for its subdomains. Empty (the default): the service fetches no URL. An "
        "address that is not public is fetched only from a host listed by its exact name.")
    web_max_pages: int = Field(20, ge=1, le=1000, description="Most pages one URL request fetches.")
    web_max_page_bytes: int = Field(2 * 1024 * 1024, ge=1024, description="Largest page fetched.")
    web_delay_s: float = Field(0.5, ge=0, description="Seconds between two requests to one site.")
    redis_url: SecretStr | None = Field(None, description="Redis (redis://host:6379/0) where every "
                                        "server process counts the keys' request rates; unset: "
                                        "they are counted in the store (table rate_windows).")
    redis_prefix: str = Field("citewise:", min_length=1, description="Prefix of the Redis keys "
                              "the service writes (rate:{key} after it).")

    @field_validator("redis_url")
    @classmethod
    def _redis_url(cls, url: SecretStr | None) -> SecretStr | None:
        if url is None or not url.get_secret_value():
            return None
        if url.get_secret_value().partition("://")[0] not in ("redis", "rediss", "unix"):
            raise ValueError("CITEWISE_REDIS_URL is redis://[:password@]host:port/db, "
                             "rediss://... (TLS) or unix:///path/redis.sock")
        if importlib.util.find_spec("redis") is None:
            raise ValueError("CITEWISE_REDIS_URL needs the redis package: "
                             "pip install 'citewise[serve]'")
        return url

    @field_validator("embedders", "generators", "web_hosts", mode="before")
    @classmethod
    def _split(cls, value: object) -> object:
        if isinstance(value, str):
            return [part.strip() for part in value.split(",") if part.strip()]
        return value

    @property
    def allowed_embedders(self) -> list[str]:
        """The server's embedder first, then the others the operator allows."""
        return list(dict.fromkeys([self.embedder, *self.embedders]))

    @property
    def allowed_generators(self) -> list[str]:
        return list(dict.fromkeys(self.generators)) or [DEFAULT_GENERATOR]

    @property
    def per_tenant_slots(self) -> int:
        return self.tenant_slots or max(1, self.compute_slots // 2)

    def require_admin_key(self) -> str:
        if self.admin_key is None or len(self.admin_key.get_secret_value()) < 16:
            raise ConfigError(ADMIN_KEY_HELP + " (at least 16 characters).")
        return self.admin_key.get_secret_value()


@lru_cache
def get_settings() -> Settings:
    return Settings()
