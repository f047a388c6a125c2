"""Secrets are never printed or passed on a command line (issue 28): ``serve`` and ``console``
name their store without its password, the console hands the store's URL to Streamlit in its
environment (a command line is visible to every local user in ``ps``), and the service's log
lines carry no password, whoever logs them."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import uvicorn
from typer.testing import CliRunner

from citewise.api.settings import get_settings
from citewise.cli import app as cli_app
from citewise.cli import serve
from citewise.server import create_app

URL = "postgresql://citewise:s3cret-pw@db.internal:5432/kb"
SHOWN = "postgresql://citewise:***@db.internal:5432/kb"


@pytest.fixture(name="quiet_env")
def quiet_env_fixture(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """No citewise.toml, and the variables ``serve`` sets restored afterwards."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    monkeypatch.setenv("CITEWISE_ADMIN_KEY", "admin-" + "x" * 32)
    monkeypatch.setenv("CITEWISE_DB", "unused.db")
    monkeypatch.setenv("CITEWISE_WORKERS", "1")
    get_settings.cache_clear()
    yield
    get_settings.cache_clear()


def test_serve_names_its_store_without_the_password(quiet_env: None,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    ran: dict[str, Any] = {}
    monkeypatch.setattr(uvicorn, "run", lambda *args, **kw: ran.update(kw))
    r = CliRunner().invoke(cli_app, ["--db", URL, "serve", "--port", "8123"])
    assert r.exit_code == 0, r.output
    assert "s3cret" not in r.output and SHOWN in r.output, r.output
    assert ran["port"] == 8123  # it got as far as starting the server


def test_console_gives_streamlit_the_store_in_its_environment_only(
        quiet_env: None, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[tuple[list[str], dict[str, str]]] = []
    monkeypatch.setattr(serve, "supervise", lambda command, env: calls.append((command, env)) or 0)
    r = CliRunner().invoke(cli_app, ["--db", URL, "console"])
    assert r.exit_code == 0, r.output
    assert "s3cret" not in r.output and SHOWN in r.output, r.output
    [(command, env)] = calls
    assert "streamlit" in command and not any("s3cret" in part or "db.internal" in part
                                              for part in command), command
    assert env["CITEWISE_DB"] == URL  # the child reads it from there


def test_no_log_line_of_the_service_carries_a_password(caplog: pytest.LogCaptureFixture) -> None:
    create_app()
    caplog.set_level(logging.INFO)
    logging.getLogger("uvicorn.error").warning("store %s is down", URL)
    logging.getLogger("citewise.api.compute").warning(
        "GenerationError: openai-compatible:http://user:pr0vider-pw@models.internal/v1#m failed")
    try:
        raise RuntimeError(f"cannot open {URL}")
    except RuntimeError:
        logging.getLogger("some.library").exception("it failed")
    assert "s3cret" not in caplog.text and "pr0vider" not in caplog.text, caplog.text
    assert SHOWN in caplog.text and "http://user:***@models.internal/v1" in caplog.text
