"""Help in words, as ``llm`` and click show it: an option that takes a value shows its kind
(``TEXT``, ``INTEGER``, ``FLOAT``, ``PATH``), a flag shows nothing, and square brackets in a
help text are text (``[default: ...]``), not rich markup that swallows them and leaves a
stray " ." behind (typer 0.2x shows Python types: ``<bool>``, ``<list[str]>``). Each command's
help opens with one line, its details flow as paragraphs, and it ends with its examples.
"""

from __future__ import annotations

import inspect
from typing import Any

from rich.markup import escape

# two or three examples ending each command's help, by its path (a test holds every command to
# having them); the sample collection and its labelled questions ship in examples/
EXAMPLES: dict[str, tuple[str, ...]] = {
    "": ("citewise ingest --kb smoking examples/smoking-cessation",
         'citewise ask --kb smoking "How long do nicotine withdrawal symptoms last?"',
         "citewise kb show smoking"),
    "ingest": ("citewise ingest --kb smoking examples/smoking-cessation",
               "citewise ingest --kb docs https://example.com/sitemap.xml --max-pages 50",
               "citewise ingest --kb scifact corpus.jsonl --ray --json"),
    "ask": ('citewise ask --kb smoking "How is varenicline dosed?"',
            'citewise ask --kb smoking "How is varenicline dosed?" --json --fail-on-refusal',
            'citewise ask --kb smoking "What is bupropion?" --generator openai:gpt-4o-mini --stream'),
    "search": ('citewise search --kb smoking "varenicline nausea"',
               'citewise search --kb smoking "varenicline nausea" -k 10 --mode bm25 --json'),
    "chat": ("citewise chat --kb smoking", "citewise chat --kb smoking --continue",
             "citewise chat --kb smoking --generator openai:gpt-4o-mini"),
    "calibrate": ("citewise calibrate --kb smoking examples/queries/smoking-cessation.train.jsonl",
                  "citewise calibrate --kb smoking QUERIES.jsonl --max-covered-refusal 0.02 "
                  "--policy grounded:0.5"),
    "eval": ("citewise eval --kb smoking examples/queries/smoking-cessation.test.jsonl",
             "citewise eval --kb scifact queries.jsonl --qrels test.tsv --mode dense --mode hybrid"),
    "stats": ("citewise stats --kb smoking",
              "citewise stats --kb smoking --since 2026-12-01 --json"),
    "replay": ("citewise replay --kb smoking --embedder openai:text-embedding-3-small",
               "citewise replay --kb smoking --embedder hashing:256 --sample 200 --switch"),
    "serve": ("CITEWISE_ADMIN_KEY=... citewise serve",
              "citewise --db postgresql://citewise@localhost/citewise serve --workers 2 --port 8080"),
    "console": ("citewise console", "citewise --db kb.db console --port 8502"),
    "mcp": ("citewise mcp --kb smoking",
            "citewise --db kb.db mcp --kb smoking --kb docs --generator openai:gpt-4o-mini"),
    "kb": ("citewise kb list", "citewise kb set smoking context_k=5"),
    "kb list": ("citewise kb list", "citewise kb list --json"),
    "kb show": ("citewise kb show smoking", "citewise kb show smoking --json"),
    "kb set": ("citewise kb set smoking context_k=5 fusion=rrf",
               "citewise kb set smoking generator=openai:gpt-4o-mini --json"),
    "kb backfill": ("citewise kb backfill smoking", "citewise kb backfill smoking --quiet --json"),
    "kb delete": ("citewise kb delete smoking", "citewise kb delete smoking --yes"),
    "log": ("citewise log tail --kb smoking --follow", "citewise log export questions.jsonl --kb smoking"),
    "log export": ("citewise log export questions.jsonl --kb smoking",
                   "citewise log export log.parquet --kb smoking --since 2026-12-01 --embeddings"),
    "log settings": ("citewise log settings --kb smoking",
                     "citewise log settings --kb smoking --retention-days 30 --hash-questions"),
    "log feedback": ("citewise log feedback 42 --kb smoking --helpful",
                     'citewise log feedback 43 --kb smoking --unhelpful --note "wrong dose"'),
    "log tail": ("citewise log tail --kb smoking", "citewise log tail --kb smoking -n 50 --follow"),
    "tenant": ("citewise tenant create acme", "citewise tenant key acme"),
    "tenant create": ("citewise tenant create acme", "citewise tenant create acme --json"),
    "tenant list": ("citewise tenant list", "citewise tenant list --json"),
    "tenant key": ("citewise tenant key acme",
                   "citewise tenant key acme --widget --kb docs --origin https://acme.example"),
    "tenant keys": ("citewise tenant keys acme", "citewise tenant keys acme --json"),
    "tenant revoke": ("citewise tenant revoke acme 3", "citewise tenant revoke acme 3 --json"),
}

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


def paragraphs(text: str) -> str:
    """A docstring as typer 0.2x should show it: each paragraph one flowing line (it keeps a
    docstring's line breaks after the first paragraph), a list's lines kept apart."""
    out = []
    for paragraph in inspect.cleandoc(text).split("\n\n"):
        lines = paragraph.splitlines()
        listed = any(line.lstrip().startswith(("- ", "* ")) for line in lines)
        out.append(paragraph if listed else " ".join(paragraph.split()))
    return "\n\n".join(out)


def examples(path: str) -> str:
    """The epilog of a command's help: its examples, a line each."""
    return "Examples:\n\n" + "\n\n".join(f"  {e}" for e in EXAMPLES.get(path, ()))


def plain(command: Any, path: str = "") -> None:
    """Make ``command``'s help, and its subcommands', read in words: its parameters, and the
    ``--help`` option click adds when the help is shown; end it with its examples."""
    if getattr(command, "_citewise_plain", False):
        return
    command._citewise_plain = True
    if command.help:
        command.help = paragraphs(command.help)
    if path in EXAMPLES:
        command.epilog = "\n\n".join(filter(None, [command.epilog, examples(path)]))
    listed = command.get_params

    def get_params(ctx: Any) -> list[Any]:
        params = listed(ctx)
        for param in params:
            _plain_param(param)
        return params

    command.get_params = get_params
    for name, sub in getattr(command, "commands", {}).items():
        plain(sub, f"{path} {name}".strip())
