"""What every command shares: the app, the ``--db`` option and opening the store."""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

import typer

from ..engine import Engine
from ..stores import DEFAULT_DB, open_store

app = typer.Typer(
    help="citewise: answers from your documents with citations you can open, or a refusal "
    "that says why and what it found.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


@app.callback()
def _root(
    ctx: typer.Context,
    db: str = typer.Option(
        DEFAULT_DB, "--db", envvar="CITEWISE_DB",
        help="The store: a SQLite file path or a URL: sqlite:///kb.db, "
        "mysql://user:pass@host:port/db (or mariadb://), postgresql://user:pass@host:port/db.",
    ),
) -> None:
    ctx.obj = {"db": db}


def engine(ctx: typer.Context) -> Engine:
    root = ctx.find_root()
    return Engine(open_store(root.obj["db"] if root.obj else DEFAULT_DB))


def one_of(names: Iterable[str], default: str | None = None) -> str:
    """A registry's names for an option's help: ``a (default), b or c``."""
    shown = [f"{n} (default)" if n == default else n for n in names]
    return ", ".join(shown[:-1]) + " or " + shown[-1] if len(shown) > 1 else "".join(shown)


def print_json(data: Any) -> None:
    typer.echo(json.dumps(data, indent=2, ensure_ascii=False))


KB_OPTION = typer.Option(..., "--kb", help="The knowledge base's name.")
JSON_OPTION = typer.Option(False, "--json", help="Print one JSON object (documented in README).")
