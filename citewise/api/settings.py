"""The service's settings, read from ``CITEWISE_*`` environment variables (or a ``.env`` file),
then from the ``[server]`` table of ``citewise.toml`` (and its ``[store] url`` as ``db``; see
``citewise/config.py``), then the defaults. A bad value is one ``ConfigError`` naming the
variable, or the file and the key, it came from.

Routes take them with ``Depends(get_settings)``; tests swap them with
``app.dependency_overrides[get_settings]``. Nothing here is a global mutable object.
"""

from __future__ import annotations

import importlib.util
import os
from functools import lru_cache
from typing import Annotated, Any

from pydantic import Field, SecretStr, ValidationError, field_validator
from pydantic.fields import FieldInfo
from pydantic_settings import (
    BaseSettings,
    NoDecode,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
)

from citewise.config import FileConfig, load_config
from citewise.embedders import DEFAULT_EMBEDDER
from citewise.errors import ConfigError
from citewise.generators import DEFAULT_GENERATOR
from citewise.stores import DEFAULT_DB
from citewise.web.urls import Hosts

ADMIN_KEY_HELP = (
    "The service needs an admin key to create tenants and their API keys: set the environment "
    "variable CITEWISE_ADMIN_KEY to a long random secret, e.g. "
    "`export CITEWISE_ADMIN_KEY=$(python -c 'import secrets; print(secrets.token_urlsafe(32))')`"
)


class ConfigFileSource(PydanticBaseSettingsSource):
    """The ``[server]`` table of ``citewise.toml``, below the environment variables."""

    def __init__(self, settings_cls: type[BaseSettings], config: FileConfig) -> None:
        super().__init__(settings_cls)
        self.file = config

    def get_field_value(self, field: FieldInfo, field_name: str) -> tuple[Any, str, bool]:
        return self.file.server.get(field_name), field_name, False

    def __call__(self) -> dict[str, Any]:
        fields = self.settings_cls.model_fields
        for key in self.file.server:
            if key not in fields:
                raise ConfigError(f"{self.file.where('server', key)}: unknown key; valid keys: "
                                  + ", ".join(k for k in fields if k not in ("admin_key", "db")))
        values = dict(self.file.server)
        if self.file.store_url:
            values["db"] = self.file.store_url
        return values


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="CITEWISE_", env_file=".env", extra="ignore")

    @classmethod
    def settings_customise_sources(
        cls, settings_cls: type[BaseSettings], init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource, dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        return (init_settings, env_settings, dotenv_settings,
                ConfigFileSource(settings_cls, load_config()), file_secret_settings)

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
    compute_slots: int | None = Field(None, ge=1, description="Asks, searches and ingests "
                                      "that embed at once in one server process; the rest wait "
                                      "their turn instead of fighting over the cores [default: "
                                      "the machine's cores / workers, at least 1].")
    workers: int = Field(1, ge=1, description="Server processes sharing this machine's cores "
                         "(`citewise serve --workers` sets it).")
    tenant_slots: int | None = Field(None, ge=1, description="Requests of one tenant running at "
                                     "once [default: half the compute slots, at least 1].")
    tenant_queue: int = Field(16, ge=0, description="Requests of one tenant waiting for its turn; "
                              "more at once are answered 429 before any work.")
    key_cache_s: float = Field(5.0, ge=0, description="Seconds a verified API key is remembered; "
                               "a key revoked through another process is refused here within "
                               "them (0: every request reads the store).")
    job_lease_s: float = Field(30.0, gt=0, description="Seconds an ingestion job stays its "
                               "process's without a heartbeat (renewed every third of it): a job "
                               "whose process died is taken over by another within 1.33x this.")
    worker_threads: int = Field(64, ge=8, description="Worker threads for requests that read the "
                                "store or compute (a request waiting for a compute lane holds one); "
                                "each keeps its own store connection, so a MySQL or PostgreSQL "
                                "server needs max_connections above workers x threads.")
    max_body_bytes: int = Field(1024 * 1024, ge=1024, description="Largest request body of a "
                                "JSON route; an upload may be max_files x max_upload_bytes.")
    web_hosts: Annotated[list[str], NoDecode] = Field(
        default_factory=list, description="Hosts whose pages tenants may have fetched into their "
        "knowledge bases (POST /v1/kbs/{kb}/urls), comma-separated: names or IP addresses, or "
        "*.example.com for its subdomains, each allowing ports 80 and 443, or with :port "
        "([v6]:port) that port alone. Empty (the default): the service fetches no URL. An "
        "address that is not public is fetched only from a host listed by its exact name.")
    web_max_pages: int = Field(20, ge=1, le=1000, description="Most pages one URL request fetches.")
    web_timeout_s: float = Field(60.0, gt=0, description="Seconds one page may take in all: "
                                 "connecting, headers and body (a server sending slowly is cut off).")
    web_fetches: int = Field(16, ge=1, description="URL requests fetching at once in one server "
                             "process, in threads of their own; more wait their turn, holding no "
                             "thread.")
    tenant_fetches: int = Field(2, ge=1, description="URL requests of one tenant at once; more are "
                                "answered 429 before any work.")
    web_max_page_bytes: int = Field(2 * 1024 * 1024, ge=1024, description="Largest page fetched.")
    web_delay_s: float = Field(0.5, ge=0, description="Seconds between two requests to one site.")
    redis_url: SecretStr | None = Field(None, description="Redis (redis://host:6379/0) where every "
                                        "server process counts the keys' request rates; unset: "
                                        "they are counted in the store (table rate_windows).")
    redis_prefix: str = Field("citewise:", min_length=1, description="Prefix of the Redis keys "
                              "the service writes (rate:{key} after it).")
    demo_key: SecretStr | None = Field(None, description="A widget key for the /demo page, "
                                       "which embeds the chat widget for that key's knowledge "
                                       "base (the key lists the origin the page is opened at, "
                                       "e.g. http://127.0.0.1:8000); unset: no /demo page.")

    public_url: str | None = Field(None, description="Where people reach this service "
                                   "(https://kb.example.com, with its path prefix if any): the "
                                   "sources listed in a chat completion link to a page of their "
                                   "passage there, signed and valid 90 days; unset: no links.")

    @field_validator("public_url")
    @classmethod
    def _public_url(cls, url: str | None) -> str | None:
        if url is None or not url.strip():
            return None
        scheme, sep, rest = url.strip().partition("://")
        if scheme.lower() not in ("http", "https") or not sep or not rest.strip("/") \
                or any(c in rest for c in "?#\"' <>"):
            raise ValueError("CITEWISE_PUBLIC_URL is the address people open the service at, "
                             "http:// or https:// with a host, e.g. https://kb.example.com")
        return url.strip().rstrip("/")

    @field_validator("demo_key")
    @classmethod
    def _demo_key(cls, key: SecretStr | None) -> SecretStr | None:
        return key if key is not None and key.get_secret_value().strip() else None

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

    @field_validator("web_hosts")
    @classmethod
    def _web_hosts(cls, entries: list[str]) -> list[str]:
        try:
            Hosts.listed(entries)
        except ConfigError as e:
            raise ValueError(str(e)) from None
        return entries

    @property
    def allowed_embedders(self) -> list[str]:
        """The server's embedder first, then the others the operator allows."""
        return list(dict.fromkeys([self.embedder, *self.embedders]))

    @property
    def allowed_generators(self) -> list[str]:
        return list(dict.fromkeys(self.generators)) or [DEFAULT_GENERATOR]

    @property
    def slots(self) -> int:
        """The compute slots of this process: as set, else its share of the cores."""
        return self.compute_slots or max(1, (os.cpu_count() or 2) // self.workers)

    @property
    def per_tenant_slots(self) -> int:
        return self.tenant_slots or max(1, self.slots // 2)

    def require_admin_key(self) -> str:
        if self.admin_key is None or len(self.admin_key.get_secret_value()) < 16:
            raise ConfigError(ADMIN_KEY_HELP + " (at least 16 characters).")
        return self.admin_key.get_secret_value()


def _origin(field: str, config: FileConfig) -> str:
    """Where a bad value came from: its environment variable, else the config file's key."""
    variable = f"CITEWISE_{field.upper()}"
    section, key = ("store", "url") if field == "db" else ("server", field)
    if variable not in os.environ and f"{section}.{key}" in config.origins:
        return config.where(section, key)
    return variable


def settings_of(app: Any) -> Settings:
    """The settings an app's routes get: ``get_settings``, or the app's override of it. For
    code that runs outside a route's dependencies (middleware, lifespan, async dependencies
    that must not take a worker thread just to read a cached object)."""
    return getattr(app, "dependency_overrides", {}).get(get_settings, get_settings)()


@lru_cache
def get_settings() -> Settings:
    try:
        return Settings()
    except ValidationError as e:
        first = e.errors()[0]
        field = str(first["loc"][0]) if first["loc"] else ""
        raise ConfigError(f"{_origin(field, load_config())}: {first['msg']}") from None
