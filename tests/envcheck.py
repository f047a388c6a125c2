"""The one way a test says "this machine lacks something I need".

On a developer's machine a missing server, browser or package skips the test with the reason;
under CI (``CI`` set, and not ``0``/``false``) it fails instead: CI runs every test. Tests never
call ``pytest.skip`` or ``pytest.importorskip`` for the environment themselves.
"""

from __future__ import annotations

import importlib
import os
from types import ModuleType
from typing import NoReturn

import pytest


def under_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def unavailable(what: str) -> NoReturn:
    """Skip (or, under CI, fail) because ``what`` is not available on this machine."""
    if under_ci():
        pytest.fail(f"{what} is not available, and CI must run every test")
    pytest.skip(f"{what} is not available")


def need(ok: object, what: str) -> None:
    """Go on if ``ok`` is true; otherwise ``what`` is unavailable (see :func:`unavailable`)."""
    if not ok:
        unavailable(what)


def need_module(name: str, what: str = "") -> ModuleType:
    """The module ``name``, imported; when it cannot be, ``what`` (or the package) is unavailable."""
    try:
        return importlib.import_module(name)
    except ImportError as e:
        unavailable(what or f"the {name} package ({e})")
