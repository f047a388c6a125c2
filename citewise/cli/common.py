"""What every command shares: the app, ``--db``, ``--version``, the config file and opening
the store."""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

import typer

from citewise.cli.exits import EXIT_CODES_HELP, CitewiseGroup
from citewise.config import FileConfig, load_config
from citewise.engine import Engine
from citewise.stores import DEFAULT_DB, Store, open_store

app = typer.Typer(
    cls=CitewiseGroup,
    help="citewise: answers from your documents with citations, or a refusal that says why.\n\n"
    "An answer's citations open the passages it rests on; a refusal shows what was found. "
    "Settings come from flags, then CITEWISE_* environment "
    "variables, then citewise.toml (this folder's, then ~/.config/citewise/).",
    epilog=EXIT_CODES_HELP,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _version(value: bool) -> None:
    if value:
        from citewise import __version__

        typer.echo(f"citewise {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    ctx: typer.Context,
    db: str = typer.Option(
        None, "--db", envvar="CITEWISE_DB",
        help="The store: a SQLite file path or a URL: sqlite:///kb.db, "
        "mysql://user:pass@host:port/db (or mariadb://), postgresql://user:pass@host:port/db "
        "[default: citewise.toml's [store] url, else citewise.db].",
    ),
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True,
                                 help="Print the version and exit."),
    tenant: str = typer.Option(
        None, "--tenant", envvar="CITEWISE_TENANT",
        help="Work on this tenant's knowledge bases (the HTTP service's tenants) instead of the "
        "operator's own [default: the operator's]."),
) -> None:
    config = load_config()
    ctx.obj = {"db": db or config.store_url or DEFAULT_DB, "config": config, "tenant": tenant}


def _root_obj(ctx: typer.Context) -> dict[str, Any]:
    root = ctx.find_root()
    return root.obj or {"db": DEFAULT_DB, "config": FileConfig()}


def store_url(ctx: typer.Context) -> str:
    """The store the command works on: --db, CITEWISE_DB, citewise.toml, then citewise.db."""
    return str(_root_obj(ctx)["db"])


def file_config(ctx: typer.Context) -> FileConfig:
    config = _root_obj(ctx)["config"]
    assert isinstance(config, FileConfig)
    return config


def store(ctx: typer.Context) -> Store:
    """The store itself, for what is not the engine's (tenants and their keys)."""
    return open_store(store_url(ctx))


def engine(ctx: typer.Context) -> Engine:
    """The engine on the store, seen from ``--tenant``'s knowledge bases when it is given."""
    store = open_store(store_url(ctx))
    tenant = _root_obj(ctx).get("tenant")
    if not tenant:
        return Engine(store)
    from citewise.stores.tenants import OneTenant

    try:
        found = store.tenants.get_tenant(tenant)
    except Exception:
        store.close()
        raise
    return Engine(OneTenant(store, found).as_store())


def one_of(names: Iterable[str], default: str | None = None) -> str:
    """A registry's names for an option's help: ``a (default), b or c``."""
    shown = [f"{n} (default)" if n == default else n for n in names]
    return ", ".join(shown[:-1]) + " or " + shown[-1] if len(shown) > 1 else "".join(shown)


def print_json(data: Any) -> None:
    typer.echo(json.dumps(data, indent=2, ensure_ascii=False))


KB_OPTION = typer.Option(..., "--kb", help="The knowledge base's name.")
JSON_OPTION = typer.Option(False, "--json", help="Print one JSON object (documented in docs/output.md).")
