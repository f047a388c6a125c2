"""``citewise tenant create|list|key|keys|revoke``: tenants and API keys, on this machine's store
(the same as ``/v1/admin`` over HTTP)."""

from __future__ import annotations

import dataclasses

import typer

from citewise.cli.common import JSON_OPTION, print_json, store
from citewise.errors import ConfigError
from citewise.tenancy import KeyKind, check_key_scope

app = typer.Typer(help="Create tenants and their API keys for `citewise serve`.", no_args_is_help=True)


@app.command()
def create(ctx: typer.Context, name: str = typer.Argument(..., help="The tenant's name."),
           as_json: bool = JSON_OPTION) -> None:
    """Create a tenant."""
    tenant = store(ctx).tenants.create_tenant(name)
    if as_json:
        print_json(dataclasses.asdict(tenant))
        return
    typer.echo(f"Created tenant {tenant.name} (id {tenant.id}).")


@app.command("list")
def list_(ctx: typer.Context, as_json: bool = JSON_OPTION) -> None:
    """List tenants."""
    tenants = store(ctx).tenants.list_tenants()
    if as_json:
        print_json([dataclasses.asdict(t) for t in tenants])
        return
    for t in tenants:
        typer.echo(f"{t.name}\tid {t.id}\tcreated {t.created_at}")


@app.command()
def key(
    ctx: typer.Context,
    tenant: str = typer.Argument(..., help="The tenant's name."),
    widget: bool = typer.Option(False, "--widget", help="A widget key: one knowledge base, listed origins."),
    kb: str = typer.Option(None, "--kb", help="The knowledge base a widget key asks."),
    origin: list[str] = typer.Option([], "--origin",
                                     help="An origin a widget key is accepted from (repeat)."),
    rate: int = typer.Option(120, min=1, help="Requests per minute."),
    label: str = typer.Option("", help="A note to recognise the key by."),
    as_json: bool = JSON_OPTION,
) -> None:
    """Create an API key and print it once; only its sha256 is stored."""
    tenants = store(ctx).tenants
    owner = tenants.get_tenant(tenant)
    kind: KeyKind = "widget" if widget else "tenant"
    scope, origins = check_key_scope(kind, kb, origin)
    record, token = tenants.create_key(owner, kind, scope, origins, rate, label)
    if as_json:
        print_json({**dataclasses.asdict(record), "key": token})
        return
    typer.echo(token)
    typer.echo(f"({record.kind} key {record.id} for {tenant}; shown once, keep it safe)", err=True)


@app.command()
def keys(ctx: typer.Context, tenant: str = typer.Argument(..., help="The tenant's name."),
         as_json: bool = JSON_OPTION) -> None:
    """List a tenant's keys (their first characters only)."""
    tenants = store(ctx).tenants
    records = tenants.list_keys(tenants.get_tenant(tenant))
    if as_json:
        print_json([dataclasses.asdict(r) for r in records])
        return
    for r in records:
        state = f"revoked {r.revoked_at}" if r.revoked_at else "active"
        scope = f" kb {r.kb} origins {','.join(r.origins)}" if r.kind == "widget" else ""
        typer.echo(f"{r.id}\t{r.prefix}…\t{r.kind}{scope}\t{r.rate_per_minute}/min\t{state}")


@app.command()
def revoke(ctx: typer.Context, tenant: str = typer.Argument(..., help="The tenant's name."),
           key_id: int = typer.Argument(..., help="The key's id (from `tenant keys`)."),
           as_json: bool = JSON_OPTION) -> None:
    """Revoke a key."""
    tenants = store(ctx).tenants
    if not tenants.revoke_key(tenants.get_tenant(tenant), key_id):
        raise ConfigError(f"No active key {key_id} for tenant {tenant!r}")
    if as_json:
        print_json({"tenant": tenant, "key_id": key_id, "revoked": True})
        return
    typer.echo(f"Revoked key {key_id}.")
