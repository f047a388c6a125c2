"""``citewise replay``: logged questions against a new embedder; optionally switch over."""

from __future__ import annotations

from pathlib import Path

import typer
from tqdm import tqdm

from citewise.answer.sentence_vectors import backfill
from citewise.calibrate.querysets import load_queries
from citewise.cli.common import JSON_OPTION, KB_OPTION, engine, print_json
from citewise.cli.stats import SINCE_OPTION, _pct
from citewise.embedders import embedder_of
from citewise.telemetry.log import iso
from citewise.telemetry.replay import ReplayReport, replay, switch_over


def _print(r: ReplayReport, show: int) -> None:
    d = r.to_dict()
    same = " (same embedder: stored query embeddings, nothing re-embedded)" if r.same_embedder else ""
    typer.echo(f"{r.kb}: {r.old_embedder} -> {r.new_embedder}{same}")
    typer.echo(f"  {d['questions']} logged questions replayed, {r.skipped} skipped "
               f"(hashed, no embedding); {r.chunks_embedded} chunks and {r.questions_embedded} "
               "questions embedded")
    typer.echo(f"  overlap@5 of retrieved documents: "
               f"{'-' if r.overlap_at_5 is None else f'{r.overlap_at_5:.3f}'}")
    og, ng = r.old_gate, r.new_gate
    for label, key, g in (("old", "flips_old_threshold", og), ("new", "flips_new_threshold", ng)):
        f = d[key]
        typer.echo(f"  under the {label} threshold ({g.policy} >= {g.threshold:.3f}, {g.source}): "
                   f"{len(f['answer_to_refusal'])} answer->refusal, "
                   f"{len(f['refusal_to_answer'])} refusal->answer")
    a = d["gate_pass_share"]
    typer.echo(f"  passed the gate: old {_pct(a['old'])}, new at old threshold "
               f"{_pct(a['new_old_threshold'])}, new at new threshold {_pct(a['new_new_threshold'])}")
    typer.echo(f"  new threshold: {r.new_gate_note}")
    if r.labelled:
        typer.echo(f"  labelled set ({r.labelled['queries']} queries):")
        for side in ("old", "new_old_threshold", "new_new_threshold"):
            s = r.labelled[side]
            buckets = ", ".join(f"{b} {_pct(v)}" for b, v in s["refusal_rate_by_bucket"].items())
            typer.echo(f"    {side:<18} recall@5 {s['recall_at_5']}  refused {_pct(s['refusal_rate'])} "
                       f"({buckets})")
    if r.feedback:
        typer.echo(f"  feedback ({r.feedback['rated']} rated, {r.feedback['helpful']} helpful):")
        for side in ("old", "new"):
            s = r.feedback[side]
            typer.echo(f"    {side:<4} recall@5 of cited documents {s['recall_at_5_cited']}, refused: "
                       f"helpful ones {_pct(s['refusal_rate_helpful'])}, unhelpful ones "
                       f"{_pct(s['refusal_rate_unhelpful'])}; helpful decisions kept "
                       f"{_pct(s['helpful_decision_kept'])}")
    flipped = [q for q in r.questions if q.old.answer_old_threshold != q.new.answer_old_threshold]
    for q in flipped[:show]:
        arrow = "answer->refusal" if q.old.answer_old_threshold else "refusal->answer"
        typer.echo(f"    #{q.log_id} {arrow}  cos {q.old.signal:.3f} -> {q.new.signal:.3f}  "
                   f"{q.question or '(hashed)'}")


def replay_cmd(
    ctx: typer.Context,
    kb: str = KB_OPTION,
    embedder: str = typer.Option(..., help="The new embedder's spec, e.g. hashing:256."),
    since: str = SINCE_OPTION,
    sample: int = typer.Option(None, min=1, help="Replay a seeded random sample of N questions."),
    seed: int = typer.Option(0, help="Seed of --sample."),
    labelled: Path = typer.Option(None, exists=True, dir_okay=False,
                                  help="A labelled query set (JSONL) to compare recall and refusals."),
    switch: bool = typer.Option(False, "--switch",
                                help="After the report, move the knowledge base to the new embedder "
                                     "(one transaction)."),
    show: int = typer.Option(10, help="Flipped questions to list (text output)."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress bar."),
    as_json: bool = JSON_OPTION,
) -> None:
    """Try a new embedder on the logged questions, and switch to it.

    Replay logged questions against a new embedder: a shadow index of the knowledge base is
    built beside the live one, and the report compares retrieval and gate decisions for the
    same questions. --switch then moves the knowledge base over atomically."""
    eng = engine(ctx)
    the_kb = eng.store.get_kb(kb)
    queries = load_queries(labelled) if labelled else None
    with tqdm(total=eng.store.count_chunks(the_kb), unit="chunk", desc="shadow index",
              disable=quiet or as_json, leave=False) as bar:
        report = replay(eng.store, the_kb, embedder, since=iso(since), sample=sample,
                        labelled=queries, seed=seed, progress=bar.update)
    switched = None
    if switch:
        switched = switch_over(eng.store, the_kb, report)
        # the old embedder's sentence vectors went with the switch: embed the new one's
        with tqdm(total=eng.store.count_chunks(switched), unit="chunk", desc="sentence vectors",
                  disable=quiet or as_json, leave=False) as bar:
            backfill(eng.store, switched, embedder_of(switched),
                     progress=bar.update)
    else:  # a later switch replays again, so the shadow vectors would only take space
        eng.store.drop_shadow(the_kb)
    if as_json:
        print_json({**report.to_dict(), "switched": switched is not None})
        return
    _print(report, show)
    if switched is not None:
        typer.echo(f"switched {kb} to {switched.config.embedder} ({switched.config.dim} dims)")


def register(app: typer.Typer) -> None:
    app.command("replay")(replay_cmd)
