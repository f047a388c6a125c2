"""``citewise chat``: ask one knowledge base question after question, keeping the conversation.

The conversation is kept on this machine so that ``--continue`` can resume it: the turns (each
cut as ``ask``'s history is) in ``$XDG_STATE_HOME/citewise/chats/`` (else
``~/.local/state/citewise/chats/``), one file per store and knowledge base, written after each
answer. A knowledge base whose query log hashes questions (``log settings --hash-questions``)
keeps no conversation on disk either.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import typer

from citewise.answer.followup import MAX_TURN_CHARS, MAX_TURNS
from citewise.answer.questions import check_history
from citewise.cli.ask import show
from citewise.cli.common import KB_OPTION, engine, store_url
from citewise.errors import QueryError
from citewise.records import Answer, Refusal, Turn

PROMPT = "> "
COMMANDS = {
    "/new": "forget the conversation and start a new one",
    "/sources": "show the last answer's sources again, with what they say",
    "/help": "list these commands",
    "/exit": "end the chat (as Ctrl-D does)",
}


def saved_at(store: str, kb: str) -> Path:
    """Where the conversation of ``kb`` in ``store`` is kept."""
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    name = hashlib.sha256(f"{store}\0{kb}".encode()).hexdigest()[:16]
    return Path(base) / "citewise" / "chats" / f"{name}.json"


def load(path: Path) -> list[Turn]:
    """The kept conversation; a missing or unreadable file is a new one (with a note)."""
    if not path.exists():
        return []
    try:
        turns = [Turn(t["role"], t["content"]) for t in json.loads(path.read_text())]
        return list(check_history(turns[-MAX_TURNS:]))
    except (ValueError, KeyError, TypeError, QueryError) as e:
        typer.secho(f"The last conversation could not be read ({e}); starting a new one.",
                    err=True, dim=True)
        return []


def save(path: Path, history: list[Turn]) -> None:
    """Keep the conversation, written whole or not at all (readable by this user only)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    part = path.with_suffix(".part")
    part.write_text(json.dumps([{"role": t.role, "content": t.content} for t in history]))
    part.chmod(0o600)
    part.replace(path)


def sources(result: Answer | Refusal | None) -> None:
    if not isinstance(result, Answer):
        typer.echo("No answer yet in this conversation." if result is None
                   else "The last question was refused, so it has no sources.")
        return
    for c in result.citations:
        typer.echo(f"[{c.n}] {c.doc_id} › {c.section}\n    {c.quote}")


def chat(
    ctx: typer.Context,
    kb: str = KB_OPTION,
    generator: str = typer.Option(
        None, help="Generator spec, as for `ask` [default: the knowledge base's]."),
    resume: bool = typer.Option(False, "--continue", "-c",
                                help="Go on with the last conversation with this knowledge base."),
) -> None:
    """Ask question after question in one conversation.

    A follow-up such as "How is it dosed?" is read with the questions before it ("What is
    varenicline?"). Type a question and press Enter; an empty line is skipped; /new starts a
    new conversation, /sources shows the last answer's sources, /help lists the commands;
    /exit, Ctrl-D (end of input) or Ctrl-C ends the chat. The conversation is kept on this
    machine for --continue."""
    eng = engine(ctx)
    base = eng.store.get_kb(kb)
    path = None if base.config.log.hash_questions else saved_at(store_url(ctx), kb)
    history = load(path) if resume and path is not None else []
    if resume and path is None:
        typer.secho("This knowledge base keeps no questions, so no conversation was kept.",
                    err=True, dim=True)
    last: Answer | Refusal | None = None
    typer.secho(f"Chatting with {kb}" + (f", going on after {len(history) // 2} questions"
                                          if history else "")
                + ". /help lists the commands; /exit or Ctrl-D ends the chat.", err=True, dim=True)
    while True:
        try:
            question = input(PROMPT)
        except (EOFError, KeyboardInterrupt):
            typer.echo(err=True)
            return
        command = question.strip().lower()
        if not command:
            continue
        if command in ("/exit", "/quit"):
            return
        if command == "/new":
            history, last = [], None
            if path is not None:
                path.unlink(missing_ok=True)
            typer.echo("A new conversation.")
            continue
        if command == "/sources":
            sources(last)
            continue
        if command.startswith("/") and " " not in command:
            if command != "/help":
                typer.secho(f"No command {command}.", fg="red", err=True)
            for name, what in COMMANDS.items():
                typer.echo(f"  {name:<9} {what}")
            continue
        try:
            last = eng.ask(base, question, generator=generator, history=history)
        except QueryError as e:  # a question too long or unstorable: say so, and go on
            typer.secho(f"Error: {e}", fg="red", err=True)
            continue
        except KeyboardInterrupt:
            typer.echo(err=True)
            return
        if last.standalone:
            typer.secho(f"(read as: {last.standalone})", dim=True)
        show(last)
        typer.echo()
        reply = last.text if isinstance(last, Answer) else last.reason
        history += [Turn("user", question[:MAX_TURN_CHARS]), Turn("assistant", reply[:MAX_TURN_CHARS])]
        history = list(check_history(history[-MAX_TURNS:]))
        if path is not None:
            save(path, history)


def register(app: typer.Typer) -> None:
    app.command()(chat)
