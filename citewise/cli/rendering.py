"""An answer's text as a terminal shows it: its Markdown (lists, bold, tables with a rule under
the header) drawn by ``rich`` when standard output is a terminal, the text as it is otherwise
(a pipe or a file gets exactly what ``--json``'s ``answer`` holds).

An answer writes a table's rows under its header row as ``units.join`` keeps them, with the
citation after the last cell (``| a | b | [2]``); for Markdown the rule goes under the header
and the citation into the last cell, so that no marker is lost.
"""

from __future__ import annotations

import re
import sys

import typer

ROW = re.compile(r"^\s*\|.*\|")
TRAILING_MARKERS = re.compile(r"\|\s*((?:\[\d+\]\s*)+)$")
RULE = re.compile(r"^\s*\|(\s*:?-{3,}:?\s*\|)+\s*$")


def markdown(text: str) -> str:
    """``text`` with each table given its header rule and its citations moved into cells."""
    lines, out = text.splitlines(), []
    for i, line in enumerate(lines):
        if ROW.match(line):
            line = TRAILING_MARKERS.sub(lambda m: f"{m.group(1).strip()} |", line.rstrip())
            out.append(line)
            starts = i == 0 or not ROW.match(lines[i - 1])
            following = lines[i + 1] if i + 1 < len(lines) else ""
            if starts and not RULE.match(following):
                cells = line.strip().strip("|").count("|") + 1
                out.append("|" + " --- |" * cells)
        else:
            out.append(line)
    return "\n".join(out)


def echo_answer(text: str) -> None:
    """Print an answer's text: drawn from its Markdown on a terminal, as it is elsewhere."""
    if not sys.stdout.isatty():
        typer.echo(text)
        return
    from rich.console import Console
    from rich.markdown import Markdown

    Console().print(Markdown(markdown(text)))
