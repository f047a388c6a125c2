"""Help in words, as ``llm`` and click show it: an option that takes a value shows its kind
(``TEXT``, ``INTEGER``, ``FLOAT``, ``PATH``), a flag shows nothing, and square brackets in a
help text are text (``[default: ...]``), not rich markup that swallows them and leaves a
stray " ." behind. typer 0.2x shows Python types instead (``<bool>``, ``<list[str]>``).
"""

from __future__ import annotations

from typing import Any

from rich.markup import escape

WORDS = {"str": "TEXT", "int": "INTEGER", "float": "FLOAT", "Path": "PATH", "bool": None}


def kind(param: Any) -> str | None:
    """What a parameter takes, in words; None for a flag, or an argument named by its metavar
    (``KEY=VALUE...`` says it already)."""
    if param.metavar is not None:
        return None if param.param_type_name == "argument" else str(param.metavar)
    if getattr(param, "is_flag", False):
        return None
    many = param.nargs != 1 or getattr(param, "multiple", False)
    bare = param.bare_type().removeprefix("list[").removesuffix("]")
    word = WORDS.get(bare, bare.upper())
    return None if word is None else word + ("..." if many else "")


def _plain_param(param: Any) -> None:
    if getattr(param, "_citewise_plain", False):
        return
    param._citewise_plain = True
    if getattr(param, "help", None):
        param.help = escape(param.help)
    shown = kind(param)
    param.display_type_rich = lambda ctx, shown=shown: shown  # this parameter's own


def plain(command: Any) -> None:
    """Make ``command``'s help, and its subcommands', read in words: its parameters, and the
    ``--help`` option click adds when the help is shown."""
    if getattr(command, "_citewise_plain", False):
        return
    command._citewise_plain = True
    listed = command.get_params

    def get_params(ctx: Any) -> list[Any]:
        params = listed(ctx)
        for param in params:
            _plain_param(param)
        return params

    command.get_params = get_params
    for sub in getattr(command, "commands", {}).values():
        plain(sub)
