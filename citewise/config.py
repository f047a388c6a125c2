"""The config file, ``citewise.toml``: the store, defaults for new knowledge bases, the server.

Two places are read: the project's file (``./citewise.toml``, in the current folder) and the
user's (``$XDG_CONFIG_HOME/citewise/citewise.toml``, else ``~/.config/citewise/citewise.toml``).
When both set a key the project's value wins. Every setting is taken, highest first, from the
command-line flag, the environment variable, the project file, the user file, the default::

    [store]
    url = "postgresql://citewise@localhost/citewise"   # like --db / CITEWISE_DB

    [kb]              # knowledge bases the CLI creates (`citewise ingest --kb NEW ...`)
    embedder = "local:all-MiniLM-L6-v2"
    chunker = "sections"
    generator = "extractive"
    context_k = 8     # and the other keys `citewise kb set` takes
    fusion = "convex"
    gate_policy = "combined:0.25"

    [server]          # `citewise serve`: the CITEWISE_* variables, lower case, no prefix
    compute_slots = 4
    generators = ["extractive", "openai:gpt-4o-mini"]

A bad file is one ``ConfigError`` naming the file and the key. Secrets stay in environment
variables: ``[server] admin_key`` is refused, and so is a ``[server] redis_url`` with a
password. The ``[server]`` values are checked by the service's settings
(``citewise/api/settings.py``) when it starts.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from citewise.errors import ConfigError

FILE_NAME = "citewise.toml"
SECTIONS = ("store", "kb", "server")
STORE_KEYS = ("url",)
KB_CREATION_KEYS = ("embedder", "chunker")  # fixed once a knowledge base has content
SERVER_REFUSED = {
    "admin_key": "it is a secret: set the environment variable CITEWISE_ADMIN_KEY",
    "db": "the store is [store] url",
}

SERVER_SECRET_URLS = {  # read from a file only without a password
    "redis_url": "it is a secret: set the environment variable CITEWISE_REDIS_URL",
}


def _password(url: str) -> bool:
    try:
        return bool(urlsplit(url).password)
    except ValueError:  # not a URL: the service's settings say what is wrong with it
        return False


@dataclass(frozen=True)
class FileConfig:
    """What the config files say; ``origins`` maps ``section.key`` to the file that set it."""

    files: tuple[Path, ...] = ()
    store_url: str | None = None
    kb: Mapping[str, Any] = field(default_factory=dict)
    server: Mapping[str, Any] = field(default_factory=dict)
    origins: Mapping[str, Path] = field(default_factory=dict)

    def where(self, section: str, key: str) -> str:
        """``FILE: [section] key``, for a message about a value read from a file."""
        return f"{self.origins.get(f'{section}.{key}', FILE_NAME)}: [{section}] {key}"


def user_config_dir(env: Mapping[str, str] | None = None) -> Path:
    env = os.environ if env is None else env
    xdg = env.get("XDG_CONFIG_HOME", "")
    base = Path(xdg) if xdg and Path(xdg).is_absolute() else Path.home() / ".config"
    return base / "citewise"


def config_paths(cwd: Path | None = None, env: Mapping[str, str] | None = None) -> list[Path]:
    """The files that exist, lowest priority first: the user's, then the project's."""
    candidates = [user_config_dir(env) / FILE_NAME, (cwd or Path.cwd()) / FILE_NAME]
    found: list[Path] = []
    for path in candidates:
        if path.is_file() and not any(path.samefile(p) for p in found):
            found.append(path)
    return found


def _bad(path: Path, section: str, key: str, problem: str) -> ConfigError:
    return ConfigError(f"{path}: [{section}] {key}: {problem}")


def _check_kb(path: Path, values: Mapping[str, Any]) -> dict[str, Any]:
    from citewise import kb_settings
    from citewise.embedders import REGISTRY as EMBEDDERS
    from citewise.ingest.chunking import CHUNKERS

    checked: dict[str, Any] = {}
    for key, value in values.items():
        try:
            if key == "embedder":
                if not isinstance(value, str) or value.partition(":")[0] not in EMBEDDERS:
                    raise ConfigError(f"an embedder spec, one of {', '.join(sorted(EMBEDDERS))} "
                                      f"(e.g. local:all-MiniLM-L6-v2), not {value!r}")
                checked[key] = value
            elif key == "chunker":
                if value not in CHUNKERS:
                    raise ConfigError(f"one of {', '.join(CHUNKERS)}, not {value!r}")
                checked[key] = value
            elif key in kb_settings.KEYS:
                checked[key] = kb_settings.check_value(key, value)
            else:
                raise ConfigError("unknown key; valid keys: "
                                  + ", ".join([*KB_CREATION_KEYS, *kb_settings.KEYS]))
        except ConfigError as e:
            raise _bad(path, "kb", key, str(e)) from None
    try:  # settings that must agree with each other (keyword shares)
        kb_settings.check_together({k: v for k, v in checked.items() if k in kb_settings.KEYS})
    except ConfigError as e:
        raise ConfigError(f"{path}: [kb]: {e}") from None
    return checked


def read_file(path: Path) -> dict[str, dict[str, Any]]:
    """One file's sections, checked; ``ConfigError`` naming the file and the key."""
    try:
        with path.open("rb") as f:
            raw = tomllib.load(f)
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"{path}: not valid TOML: {e}") from None
    except OSError as e:
        raise ConfigError(f"{path}: cannot be read: {e.strerror or e}") from None
    out: dict[str, dict[str, Any]] = {}
    for section, values in raw.items():
        if section not in SECTIONS and not isinstance(values, dict):
            raise ConfigError(f"{path}: {section}: a key outside any section; put it under "
                              + ", ".join(f"[{s}]" for s in SECTIONS))
        if section not in SECTIONS:
            raise ConfigError(f"{path}: unknown section [{section}]; valid sections: "
                              + ", ".join(f"[{s}]" for s in SECTIONS))
        if not isinstance(values, dict):
            raise ConfigError(f"{path}: {section} must be a table: [{section}] on a line of "
                              "its own, then key = value lines")
        out[section] = dict(values)
    for key, value in out.get("store", {}).items():
        if key not in STORE_KEYS:
            raise _bad(path, "store", key, "unknown key; valid keys: " + ", ".join(STORE_KEYS))
        if not isinstance(value, str) or not value.strip():
            raise _bad(path, "store", key, "a store URL or SQLite path, as a string")
    if "kb" in out:
        out["kb"] = _check_kb(path, out["kb"])
    for key, value in out.get("server", {}).items():
        if key in SERVER_REFUSED:
            raise _bad(path, "server", key, f"not read from a file: {SERVER_REFUSED[key]}")
        if key in SERVER_SECRET_URLS and isinstance(value, str) and _password(value):
            raise _bad(path, "server", key, "not read from a file with its password: "
                       f"{SERVER_SECRET_URLS[key]}")
    return out


def load_config(cwd: Path | None = None, env: Mapping[str, str] | None = None) -> FileConfig:
    """The config files merged (the project's values over the user's); empty when none exist."""
    paths = config_paths(cwd, env)
    merged: dict[str, dict[str, Any]] = {s: {} for s in SECTIONS}
    origins: dict[str, Path] = {}
    for path in paths:
        for section, values in read_file(path).items():
            merged[section].update(values)
            origins.update({f"{section}.{key}": path for key in values})
    return FileConfig(tuple(paths), merged["store"].get("url"), merged["kb"], merged["server"],
                      origins)


__all__ = ["FILE_NAME", "FileConfig", "config_paths", "load_config", "read_file",
           "user_config_dir"]
