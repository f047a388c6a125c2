"""Exit codes, and where click's exceptions become one line and an exit code.

The root command group's ``main`` handles usage errors, so the installed ``citewise`` script,
``python -m citewise`` and typer's ``CliRunner`` in the tests behave alike: one line on stderr
and exit code 2, never a traceback. typer 0.2x raises the exceptions of the click it vendors
(``typer._click``), older typer those of ``click`` itself; both are caught. A citewise error
passes through (tests read it from ``result.exception``) to ``citewise.cli.main``, which
prints it as one line with exit code 1.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any, NoReturn

import typer
import typer.core

from citewise.cli import helptext

try:  # typer that vendors click
    from typer._click.exceptions import ClickException, UsageError
except ImportError:  # pragma: no cover - typer < 0.2x uses click itself
    from click.exceptions import ClickException, UsageError  # type: ignore[assignment]  # same names, click's classes

OK = 0
ERROR = 1
USAGE = 2
REFUSED = 3  # `ask --fail-on-refusal` when the answer is a refusal
INTERRUPTED = 130

EXIT_CODES_HELP = (
    f"Exit codes: {OK} done (for ask: answered), {ERROR} error, {USAGE} usage error (unknown "
    f"option, missing argument, a path that does not exist), {REFUSED} refused (ask "
    f"--fail-on-refusal), {INTERRUPTED} interrupted."
)


def one_line(text: str) -> str:
    return " ".join(str(text).split())


def _usage(e: UsageError) -> NoReturn:
    if type(e).__name__ == "NoArgsIsHelpError":  # `citewise` or `citewise kb` alone: the help
        e.show()
        sys.exit(USAGE)
    message = one_line(e.format_message()).rstrip(".") + "."
    if e.ctx is not None:
        message += f" Try '{e.ctx.command_path} --help'."
    typer.secho(f"Error: {message}", fg="red", err=True)
    sys.exit(e.exit_code)


class CitewiseGroup(typer.core.TyperGroup):
    """The root group: runs a command and turns whatever it raised into one line and a code."""

    def main(self, args: Sequence[str] | None = None, prog_name: str | None = None,
             complete_var: str | None = None, standalone_mode: bool = True,
             windows_expand_args: bool = True, **extra: Any) -> Any:
        helptext.plain(self)
        if not standalone_mode:  # the caller handles exceptions itself
            return super().main(args, prog_name, complete_var, standalone_mode=False,
                                windows_expand_args=windows_expand_args, **extra)
        try:
            code = super().main(args, prog_name or "citewise", complete_var,
                                standalone_mode=False, windows_expand_args=windows_expand_args,
                                **extra)
        except UsageError as e:
            _usage(e)
        except ClickException as e:  # a file option that cannot be opened, and the like
            typer.secho(f"Error: {one_line(e.format_message())}", fg="red", err=True)
            sys.exit(e.exit_code)
        except typer.Abort:  # a confirmation answered no
            typer.echo("Aborted.", err=True)
            sys.exit(ERROR)
        except KeyboardInterrupt:  # typer < 0.2x passes it through
            code = INTERRUPTED
        # without standalone mode a command's `typer.Exit(n)` (and Ctrl-C, as 130) comes back
        # as the return value; a command that finished returns None
        code = code if isinstance(code, int) else OK
        if code == INTERRUPTED:
            typer.echo("Interrupted; documents already stored are complete.", err=True)
        sys.exit(code)
