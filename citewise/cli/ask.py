"""``citewise ask`` and ``citewise search``."""

from __future__ import annotations

import typer

from citewise.answer import plain
from citewise.answer.questions import check_question
from citewise.answer.streaming import Sentence
from citewise.cli import exits
from citewise.cli.common import JSON_OPTION, KB_OPTION, engine, one_of, print_json
from citewise.cli.rendering import echo_answer
from citewise.errors import QueryError
from citewise.generators import REGISTRY as GENERATORS
from citewise.ingest.units import is_table
from citewise.output import chunk_dict, to_dict
from citewise.records import Answer, Refusal
from citewise.search.retrieval import DEFAULT_MODE, MODES, get_mode


def _asked(question: str) -> str:
    """An empty or oversized question is a usage error (exit 2), as a bad option value is."""
    try:
        return check_question(question)
    except QueryError as e:
        raise typer.BadParameter(str(e)) from None


def _short(text: str, width: int = 160) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


def ask(
    ctx: typer.Context,
    question: str = typer.Argument(..., help="The question, in quotes.", callback=lambda q: _asked(q)),
    kb: str = KB_OPTION,
    generator: str = typer.Option(
        None, help=f"Generator spec, NAME or NAME:ARGUMENT, one of {', '.join(GENERATORS)} "
        "(e.g. openai:MODEL, openai-compatible:URL#MODEL) [default: the knowledge base's]."),
    stream: bool = typer.Option(False, "--stream", help="Print each checked sentence as it is written."),
    as_json: bool = JSON_OPTION,
    fail_on_refusal: bool = typer.Option(
        False, "--fail-on-refusal", help=f"Exit with code {exits.REFUSED} when the answer is a "
        "refusal (0 when answered), so a script can branch."),
) -> None:
    """Answer a question with citations, or refuse and say why and what was found."""
    eng = engine(ctx)
    if stream and not as_json:
        for event in eng.ask_stream(eng.store.get_kb(kb), question, generator=generator):
            if isinstance(event, Sentence):
                typer.echo(event.text + " ", nl=False)
            else:
                result = event.result
        typer.echo()
    else:
        result = eng.ask(eng.store.get_kb(kb), question, generator=generator)
    if as_json:
        print_json(to_dict(result))
    else:
        show(result, streamed=stream)
    _refused_exit(result, fail_on_refusal)


def show(result: Answer | Refusal, streamed: bool = False) -> None:
    """An answer with its sources, or a refusal's plain reason (which names the closest
    topics, once) and the closest passages; warnings on stderr."""
    for w in result.warnings:
        typer.secho(f"warning: {w}", fg="yellow", err=True)
    if isinstance(result, Answer):
        if not streamed:
            echo_answer(result.text)
        elif result.uncovered:  # the closing sentence is added once the draft is checked
            typer.echo(plain.uncovered(result.uncovered))
        typer.echo("\nSources:")
        for c in result.citations:
            typer.echo(f"  [{c.n}] {c.doc_id} › {c.section}  (chunk {c.chunk_id})")
            if any(is_table(line) for line in c.quote.splitlines()):  # a table stays rows
                for line in c.quote.splitlines():
                    typer.echo(f"      {_short(line)}" if line.strip() else "")
            else:
                typer.echo(f"      \"{_short(c.quote)}\"")
        return
    typer.secho(result.reason, fg="yellow")  # it says, in words, that it is not answered
    typer.echo("\nClosest passages:")
    for p in result.chunks:
        typer.echo(f"  {p.cosine:.3f}  {p.chunk.doc_id} › {p.chunk.heading}: {_short(p.chunk.text, 100)}")


def _refused_exit(result: object, fail_on_refusal: bool) -> None:
    if fail_on_refusal and not isinstance(result, Answer):
        raise typer.Exit(exits.REFUSED)


def search(
    ctx: typer.Context,
    query: str = typer.Argument(..., help="What to look for.", callback=lambda q: _asked(q)),
    kb: str = KB_OPTION,
    k: int = typer.Option(8, "-k", min=1, max=100, help="How many chunks to show."),
    mode: str = typer.Option(DEFAULT_MODE, help=f"Retrieval mode: {one_of(MODES)}."),
    as_json: bool = JSON_OPTION,
) -> None:
    """Show the chunks retrieval finds, with cosine, BM25 and fused scores (no answer)."""
    chosen = get_mode(mode)  # an unknown one is refused before the store is opened
    eng = engine(ctx)
    the_kb = eng.store.get_kb(kb)
    found = eng.retrieve(the_kb, query, mode=mode, k=k)
    mmr = chosen.mmr if chosen.mmr is not None else the_kb.config.retrieval.mmr
    order = "mmr" if mmr else "score"
    if as_json:
        print_json({"query": query, "mode": mode, "order": order,
                    "chunks": [chunk_dict(c) for c in found.context]})
        return
    typer.echo(f"{len(found.context)} chunks, {mode} retrieval, " + (
        "in the order the answer's context takes them: the best first, then each chosen for "
        "what it adds (MMR), so the scores do not always fall" if mmr else
        "best score first") + ":")
    for rank, c in enumerate(found.context, 1):
        typer.echo(
            f"{rank:>2}. cos {c.cosine:.3f}  bm25 {c.bm25:6.2f}  fused {c.fused:.4f}  "
            f"{c.chunk.doc_id} › {c.chunk.heading}"
        )
        typer.echo(f"    {_short(c.chunk.text)}")


def register(app: typer.Typer) -> None:
    app.command()(ask)
    app.command()(search)
