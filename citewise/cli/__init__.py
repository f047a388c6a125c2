"""The ``citewise`` command: one module per command group, joined here.

Errors raised by the library are turned into one message on stderr and exit code 1 here and
nowhere else; usage errors into one line and exit code 2 in ``exits.py``.
"""

from __future__ import annotations

import sys

import typer

from citewise.cli import ask, calibrate, chat, eval, exits, ingest, kb, log, mcp, replay, serve, stats, tenant
from citewise.cli.common import app
from citewise.errors import CitewiseError

ingest.register(app)
ask.register(app)
chat.register(app)
calibrate.register(app)
eval.register(app)
app.add_typer(kb.app, name="kb")
stats.register(app)
replay.register(app)
app.add_typer(log.app, name="log")
serve.register(app)
mcp.register(app)
app.add_typer(tenant.app, name="tenant")


OPTIONAL_VALUES = {"--ray": "local"}  # options whose value may be left out: `--ray` alone


def fill_optional_values(argv: list[str]) -> list[str]:
    out: list[str] = []
    for i, arg in enumerate(argv):
        out.append(arg)
        if arg in OPTIONAL_VALUES and (i + 1 == len(argv) or argv[i + 1].startswith("-")):
            out.append(OPTIONAL_VALUES[arg])
    return out


def main() -> None:
    """The ``citewise`` script. Usage errors become one line and exit code 2 in
    ``exits.CitewiseGroup.main``, citewise's own errors one line and exit code 1 here."""
    try:
        app(args=fill_optional_values(sys.argv[1:]), prog_name="citewise")
    except CitewiseError as e:
        typer.secho(f"Error: {e}", fg="red", err=True)
        sys.exit(exits.ERROR)


__all__ = ["app", "main"]
