"""``citewise serve`` (the HTTP API) and ``citewise console`` (the Streamlit research console).

Both name their store on start-up without its password (``stores.urls.redact``); the console
hands the store's URL to Streamlit in its environment (``CITEWISE_DB``), never on its command
line, which every local user can read (``ps``). Streamlit runs as a child process of
``citewise console`` (``console_command``, the tests' too), which stops it when it is stopped
itself: SIGTERM, SIGHUP or SIGINT (Ctrl-C) is passed on, and the child killed if it has not
exited within ``STOP_GRACE_S`` seconds.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path
from types import FrameType

import typer

from citewise.cli.common import store_url
from citewise.stores.urls import redact

CONSOLE = Path(__file__).resolve().parent.parent / "ui" / "console.py"
STOP_GRACE_S = 10.0
STOP_SIGNALS = tuple(getattr(signal, name) for name in ("SIGTERM", "SIGHUP", "SIGINT")
                     if hasattr(signal, name))  # no SIGHUP on Windows


def console_command(port: int, host: str) -> list[str]:
    """The Streamlit command line of the console: headless, no usage statistics, and the
    toolbar a viewer's (no "Deploy" button, no developer menu)."""
    return [
        sys.executable, "-m", "streamlit", "run", str(CONSOLE),
        "--server.port", str(port), "--server.address", host, "--server.headless", "true",
        "--browser.gatherUsageStats", "false", "--client.toolbarMode", "viewer",
    ]


class _Stopped(Exception):
    def __init__(self, signum: int) -> None:
        self.signum = signum


def supervise(command: list[str], env: dict[str, str], grace: float = STOP_GRACE_S) -> int:
    """Run ``command`` until it exits (its exit code), or until this process is sent one of
    ``STOP_SIGNALS``: then the child is sent SIGTERM, waited for and killed after ``grace``
    seconds, and the exit code is 128 + the signal's number."""
    def stopped(signum: int, frame: FrameType | None) -> None:
        raise _Stopped(signum)

    child: subprocess.Popen[bytes] | None = None
    before = {s: signal.signal(s, stopped) for s in STOP_SIGNALS}
    try:
        child = subprocess.Popen(command, env=env)
        return child.wait()
    except _Stopped as e:
        for s in STOP_SIGNALS:  # a second signal while stopping does not cut the wait short
            signal.signal(s, signal.SIG_IGN)
        if child is not None:
            child.terminate()
            try:
                child.wait(grace)
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait()
        return 128 + e.signum
    finally:
        for s, handler in before.items():
            signal.signal(s, handler)


def serve(
    ctx: typer.Context,
    host: str = typer.Option("127.0.0.1", help="Address to listen on (0.0.0.0 for every interface)."),
    port: int = typer.Option(8000, min=1, max=65535, help="Port to listen on."),
    workers: int = typer.Option(1, min=1, max=64, help="Worker processes (they share the rate "
                                "limits and the cores: each gets cores / workers compute slots "
                                "unless CITEWISE_COMPUTE_SLOTS says)."),
    log_level: str = typer.Option("info", help="uvicorn log level: critical, error, warning, info, debug."),
) -> None:
    """Run the HTTP API.

    Run the HTTP API (OpenAPI docs at /docs). Needs CITEWISE_ADMIN_KEY; settings are the
    CITEWISE_* environment variables, then citewise.toml's \\[server] table (docs/settings.md).
    With CITEWISE_DEMO_KEY set to a widget key, /demo is a page with the chat widget on it."""
    import uvicorn

    from citewise.api.settings import get_settings

    os.environ["CITEWISE_DB"] = store_url(ctx)
    os.environ["CITEWISE_WORKERS"] = str(workers)  # each process's share of the cores
    get_settings.cache_clear()
    get_settings().require_admin_key()
    demo = ", the widget's demo at /demo" if get_settings().demo_key else ""
    typer.echo(f"citewise API on http://{host}:{port} (docs at /docs{demo}), store "
               f"{redact(store_url(ctx))}", err=True)
    uvicorn.run("citewise.server:create_app", factory=True, host=host, port=port,
                workers=workers, log_level=log_level)


def console(
    ctx: typer.Context,
    port: int = typer.Option(8501, min=1, max=65535, help="Port of the console."),
    host: str = typer.Option("127.0.0.1", help="Address to listen on."),
) -> None:
    """Run the research console (Streamlit).

    In a browser: ask questions as in a chat, open a cited passage in its section, see the
    retrieved chunks' scores, upload files and see the gate's calibration. Streamlit runs as
    a child process; stopping this command (Ctrl-C, SIGTERM, SIGHUP) stops it too."""
    typer.echo(f"citewise console on http://{host}:{port}, store {redact(store_url(ctx))}", err=True)
    raise typer.Exit(supervise(console_command(port, host),
                               {**os.environ, "CITEWISE_DB": store_url(ctx)}))


def register(app: typer.Typer) -> None:
    app.command()(serve)
    app.command()(console)
