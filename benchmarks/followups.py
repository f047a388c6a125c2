"""Follow-ups asked in a conversation, beside the same questions asked on their own.

    python -m benchmarks.followups [--show]

Ingests the sample collection (examples/smoking-cessation) with the default local model into a
temporary store and plays each two-turn conversation of ``benchmarks/followups/
conversations.jsonl`` (written before anything was measured on it): the first question, then
the follow-up with the first turn as its history, as ``citewise chat`` asks it. Beside it the
standalone question (``means``: what a person means by the follow-up) is asked alone.

A follow-up is **right** when it is answered and cites its conversation's ``source``, or, for a
conversation whose ``source`` is null (a follow-up the collection cannot answer), when it is
refused; **wrong source** when answered from other documents only; **refused** when a
question the collection covers is refused; **answered** when one it does not cover is
answered. ``--show`` prints each follow-up as the engine read it (``standalone_question``).
"""

from __future__ import annotations

import argparse
import json
import tempfile
from collections import Counter
from pathlib import Path

from benchmarks.benchcache import conditions
from citewise.engine import Engine
from citewise.records import Answer, Refusal, Turn
from citewise.stores.sqlite import open_sqlite

ROOT = Path(__file__).resolve().parent.parent
CONVERSATIONS = ROOT / "benchmarks" / "followups" / "conversations.jsonl"
OUTCOMES = ("right", "wrong source", "refused", "answered")


def outcome(result: Answer | Refusal, source: str | None) -> str:
    if source is None:
        return "right" if isinstance(result, Refusal) else "answered"
    if isinstance(result, Refusal):
        return "refused"
    return "right" if any(c.doc_id == source for c in result.citations) else "wrong source"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--show", action="store_true", help="print how each follow-up was read")
    args = ap.parse_args()
    talks = [json.loads(line) for line in CONVERSATIONS.read_text().splitlines() if line.strip()]
    counts: dict[str, Counter[str]] = {"follow-up in conversation": Counter(), "asked on its own": Counter()}
    with tempfile.TemporaryDirectory() as tmp:
        engine = Engine(open_sqlite(Path(tmp) / "kb.db"))
        kb = engine.open_kb("sample")
        engine.ingest(kb, [ROOT / "examples/smoking-cessation"])
        for talk in talks:
            first = engine.ask(kb, talk["first"], log=False)
            said = first.text if isinstance(first, Answer) else first.reason
            history = [Turn("user", talk["first"]), Turn("assistant", said[:4000])]
            follow = engine.ask(kb, talk["follow"], history=history, log=False)
            alone = engine.ask(kb, talk["means"], log=False)
            got = outcome(follow, talk["source"]), outcome(alone, talk["source"])
            counts["follow-up in conversation"][got[0]] += 1
            counts["asked on its own"][got[1]] += 1
            if args.show:
                print(f"{talk['id']}  {got[0]:<12} {talk['follow']!r} read as "
                      f"{follow.standalone or follow.question!r}  (alone: {got[1]})")
    print(f"\n{len(talks)} two-turn conversations on the sample collection")
    print(f"{'':<28}" + "".join(f"{o:>14}" for o in OUTCOMES))
    for name, c in counts.items():
        print(f"{name:<28}" + "".join(f"{c[o]:>9} {c[o] / len(talks):4.0%}" for o in OUTCOMES))
    print(conditions())


if __name__ == "__main__":
    main()
