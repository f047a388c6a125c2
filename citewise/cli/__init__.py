"""The ``citewise`` command: one module per command group, joined here.

Errors raised by the library are turned into one message on stderr and exit code 1 here and
nowhere else; usage errors exit 2 as click does.
"""

from __future__ import annotations

import sys

import typer

from ..errors import CitewiseError
from . import ask, calibrate, chat, eval, ingest, kb, log, replay, serve, stats, tenant
from .common import app

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
    try:
        app(args=fill_optional_values(sys.argv[1:]), standalone_mode=False)
    except CitewiseError as e:
        typer.secho(f"Error: {e}", fg="red", err=True)
        sys.exit(1)
    except KeyboardInterrupt:
        typer.secho("Interrupted; documents already stored are complete.", err=True)
        sys.exit(130)
    except typer.Exit as e:
        sys.exit(e.exit_code)
    except typer.Abort:
        sys.exit(1)
    except Exception as e:  # click's usage errors arrive here under standalone_mode=False
        import click

        if isinstance(e, click.ClickException):
            e.show()
            sys.exit(e.exit_code)
        raise


__all__ = ["app", "main"]
