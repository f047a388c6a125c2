"""Do the answers to covered questions say what the sources say? Key facts on the sample collection.

    python -m benchmarks.key_facts [--split train|test] [--generator extractive] [--verbose]

Ingests the sample collection (examples/smoking-cessation) with the default local model into a
temporary store and asks every covered question of the split through the whole answer path
(gate, generator, citation check). Each covered question of
examples/queries/smoking-cessation.{train,test}.jsonl carries ``must_contain``: the short
strings of its key facts, written from the documents (an entry that is a list is met by any one
of its strings). An answer contains its key facts when every entry is found in its text
(case and white space ignored, citation markers removed).

The table gives, per question, whether it was answered, whether an answer cites one of its
labelled sources, and how many of its key facts the answer holds; the summary counts covered
questions answered with a labelled source and answers holding all their key facts. Develop on
``--split train``; the test split is for reporting.
"""

from __future__ import annotations

import argparse
import json
import re
import tempfile
from dataclasses import replace
from pathlib import Path

from citewise.engine import Engine
from citewise.records import Answer
from citewise.stores.sqlite import open_sqlite

ROOT = Path(__file__).resolve().parent.parent
MARKERS = re.compile(r"\s*\[\d+(?:\s*,\s*\d+)*\]")


def _plain(text: str) -> str:
    return " ".join(MARKERS.sub("", text).lower().split())


def found(fact: str | list[str], answer: str) -> bool:
    """Whether ``answer`` holds ``fact`` (one string, or a list of which any one will do)."""
    plain = _plain(answer)
    return any(_plain(f) in plain for f in ([fact] if isinstance(fact, str) else fact))


def covered(split: str) -> list[dict]:
    path = ROOT / f"examples/queries/smoking-cessation.{split}.jsonl"
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    return [r for r in rows if r.get("bucket") == "covered" and r.get("must_contain")]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--split", choices=("train", "test"), default="train")
    ap.add_argument("--generator", default=None, help="generator spec [default: the knowledge base's]")
    ap.add_argument("--verbose", action="store_true", help="print each answer under its row")
    ap.add_argument("--reader", choices=("auto", "none"), default="auto",
                    help="the knowledge base's reader (none: as before it) [default: auto]")
    args = ap.parse_args()
    questions = covered(args.split)
    with tempfile.TemporaryDirectory() as tmp:
        store = open_sqlite(Path(tmp) / "facts.db")
        engine = Engine(store)
        kb = engine.open_kb("sample")
        kb = store.update_kb(kb.name, replace(kb.config, reader=args.reader))
        engine.ingest(kb, [ROOT / "examples/smoking-cessation"])
        results = [engine.ask(kb, q["query"], generator=args.generator) for q in questions]
        store.close()

    print(f"{'id':<5} {'answered':<17} {'source':<6} {'facts':>5}  missing")
    answered = with_source = complete = facts_found = facts_total = 0
    for q, result in zip(questions, results, strict=True):
        is_answer = isinstance(result, Answer)
        text = result.text if isinstance(result, Answer) else ""
        cited = {c.doc_id for c in result.citations} if isinstance(result, Answer) else set()
        sourced = bool(cited & set(q["sources"]))
        missing = [f for f in q["must_contain"] if not found(f, text)]
        have = len(q["must_contain"]) - len(missing)
        answered += is_answer
        with_source += sourced
        complete += not missing
        facts_found += have
        facts_total += len(q["must_contain"])
        status = "answered" if is_answer else f"refused ({result.path})"
        print(f"{q['id']:<5} {status:<17} {'yes' if sourced else 'no':<6} "
              f"{have:>2}/{len(q['must_contain']):<2}  {'; '.join(map(str, missing))}")
        if args.verbose:
            print(f"      Q: {q['query']}\n      A: {text or result.reason}")
    n = len(questions)
    print(f"\n{args.split} split, {n} covered questions, reader {args.reader}:")
    print(f"  answered                          {answered:>3}/{n}  {answered / n:6.1%}")
    print(f"  answered with a labelled source   {with_source:>3}/{n}  {with_source / n:6.1%}")
    print(f"  answers holding all key facts     {complete:>3}/{n}  {complete / n:6.1%}")
    share = facts_found / facts_total
    print(f"  key facts found                   {facts_found:>3}/{facts_total}  {share:6.1%}")


if __name__ == "__main__":
    main()
