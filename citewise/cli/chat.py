"""``citewise chat``: ask one knowledge base question after question, keeping the conversation."""

from __future__ import annotations

import typer

from citewise.answer.followup import MAX_TURN_CHARS, MAX_TURNS
from citewise.answer.questions import check_history
from citewise.cli.ask import show
from citewise.cli.common import KB_OPTION, engine
from citewise.errors import QueryError
from citewise.records import Answer, Turn

PROMPT = "> "


def chat(
    ctx: typer.Context,
    kb: str = KB_OPTION,
    generator: str = typer.Option(
        None, help="Generator spec, as for `ask` [default: the knowledge base's]."),
) -> None:
    """Ask question after question in one conversation.

    Ask question after question in one conversation: a follow-up such as "How is it
    dosed?" is read with the questions before it ("What is varenicline?"). Type a question
    and press Enter; an empty line is skipped; Ctrl-D (end of input) or Ctrl-C ends the chat."""
    eng = engine(ctx)
    base = eng.store.get_kb(kb)
    history: list[Turn] = []
    typer.secho(f"Chatting with {kb}. Ctrl-D or Ctrl-C ends the chat.", err=True, dim=True)
    while True:
        try:
            question = input(PROMPT)
        except (EOFError, KeyboardInterrupt):
            typer.echo(err=True)
            return
        if not question.strip():
            continue
        try:
            result = eng.ask(base, question, generator=generator, history=history)
        except QueryError as e:  # a question too long or unstorable: say so, and go on
            typer.secho(f"Error: {e}", fg="red", err=True)
            continue
        except KeyboardInterrupt:
            typer.echo(err=True)
            return
        if result.standalone:
            typer.secho(f"(read as: {result.standalone})", dim=True)
        show(result)
        typer.echo()
        reply = result.text if isinstance(result, Answer) else result.reason
        history += [Turn("user", question[:MAX_TURN_CHARS]), Turn("assistant", reply[:MAX_TURN_CHARS])]
        history = list(check_history(history[-MAX_TURNS:]))


def register(app: typer.Typer) -> None:
    app.command()(chat)
