"""What a new user gets on a collection nobody calibrated: refusals per bucket, end to end.

    python -m benchmarks.uncalibrated [--verbose] [--only NAME]

Each folder of benchmarks/collections/ holds a small collection written as users write their
documents (``docs/``: a product manual PDF, an HTML help site, a Markdown FAQ, a DOCX policy,
plain-text notes) and ``questions.jsonl``: covered, thin and out-of-scope questions written
before anything was scored on them (benchmarks/collections/README.md). Each collection is
ingested into a fresh SQLite knowledge base with every default, and each question is asked
as ``citewise ask`` asks it (gate, extractive answer, citation check), twice: with the
shipped defaults (the reader on) and with ``reader=none`` (the gate and answer as they were
before the reader), the baseline. Nothing is calibrated on these collections.

Per collection and over all of them: refusal rate per bucket with exact 95% intervals, and
covered answers holding every key fact (``must_contain``, as ``benchmarks.key_facts`` counts).
"""

from __future__ import annotations

import argparse
import json
import tempfile
from dataclasses import replace
from pathlib import Path

from benchmarks.benchcache import conditions, host
from benchmarks.key_facts import found
from citewise.calibrate import end_to_end
from citewise.calibrate.intervals import clopper_pearson
from citewise.calibrate.querysets import load_queries
from citewise.engine import Engine
from citewise.records import Answer
from citewise.stores.sqlite import open_sqlite

ROOT = Path(__file__).resolve().parent / "collections"
READERS = ("auto", "none")  # the shipped default, the baseline


def collections(only: str | None) -> list[Path]:
    out = sorted(p for p in ROOT.iterdir() if (p / "questions.jsonl").exists())
    return [p for p in out if only in (None, p.name)]


def ask_all(folder: Path, reader: str, verbose: bool) -> tuple[list[end_to_end.Outcome], int, int]:
    """The outcomes of every question, and covered answers holding all key facts / answered."""
    rows = {r["id"]: r for r in map(json.loads, (folder / "questions.jsonl").read_text().splitlines()) if r}
    queries = load_queries(folder / "questions.jsonl")
    with tempfile.TemporaryDirectory() as tmp:
        store = open_sqlite(Path(tmp) / "kb.db")
        engine = Engine(store)
        kb = engine.open_kb(folder.name)
        kb = store.update_kb(kb.name, replace(kb.config, reader=reader))
        engine.ingest(kb, [folder / "docs"])
        outcomes, complete, answered = [], 0, 0
        for q in queries:
            result = engine.ask(kb, q.query, log=False)
            bucket = rows[q.id].get("bucket", "covered")
            outcomes.append(end_to_end.outcome(q, bucket, result))
            facts = rows[q.id].get("must_contain") or []
            if bucket == "covered" and isinstance(result, Answer):
                answered += 1
                complete += all(found(f, result.text) for f in facts)
            if verbose:
                said = (result.text if isinstance(result, Answer)
                        else f"REFUSED ({result.path}) {result.reason}")
                print(f"  [{reader}] {q.id} {bucket}: {q.query}\n      {said}")
        store.close()
    return outcomes, complete, answered


def rates(outcomes: list[end_to_end.Outcome]) -> dict[str, tuple[int, int]]:
    out: dict[str, tuple[int, int]] = {}
    for bucket in ("covered", "thin", "out_of_scope"):
        mine = [o for o in outcomes if o.bucket == bucket]
        out[bucket] = (sum(o.refused for o in mine), len(mine))
    return out


def cell(refused: int, n: int) -> str:
    if not n:
        return f"{'-':>22}"
    low, high = clopper_pearson(refused, n)
    return f"{refused:>3}/{n:<3}{refused / n:>6.0%} [{low:>4.0%},{high:>5.0%}]"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--verbose", action="store_true", help="print every answer and refusal")
    ap.add_argument("--only", help="one collection (a folder name)")
    args = ap.parse_args()
    print(host())
    print("refused per bucket (count/n, rate, exact 95% interval); facts = covered answers "
          "holding every key fact\n")
    print(f"{'collection':<16} {'reader':<7} {'covered refused':>22} {'thin refused':>22} "
          f"{'out of scope refused':>22} {'facts':>9}")
    totals = {r: ([], 0, 0) for r in READERS}
    for folder in collections(args.only):
        for reader in READERS:
            outcomes, complete, answered = ask_all(folder, reader, args.verbose)
            every, c, a = totals[reader]
            totals[reader] = (every + outcomes, c + complete, a + answered)
            r = rates(outcomes)
            print(f"{folder.name:<16} {reader:<7} {cell(*r['covered'])} {cell(*r['thin'])} "
                  f"{cell(*r['out_of_scope'])} {complete:>4}/{answered:<4}")
    for reader in READERS:
        every, complete, answered = totals[reader]
        r = rates(every)
        print(f"{'all':<16} {reader:<7} {cell(*r['covered'])} {cell(*r['thin'])} "
              f"{cell(*r['out_of_scope'])} {complete:>4}/{answered:<4}")
    print(conditions())
    print("\ntargets (issue #30), shipped default: covered refused <= 10%, thin >= 70%, "
          "out of scope >= 95%")


if __name__ == "__main__":
    main()
