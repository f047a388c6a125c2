"""Citable units split by structure: table rows with their header, list items, sentences; the
citation check, the chunkers and the quotes all use the same split."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from typer.testing import CliRunner

from citewise.answer import citations, support
from citewise.cli import app
from citewise.engine import Engine
from citewise.ingest.chunking import SectionsChunker, WindowChunker
from citewise.ingest.units import anchor, cells, join, split_units
from citewise.kb import GateSetting
from citewise.records import Answer, Candidate, Chunk, Document, Section
from citewise.stores.sqlite import open_sqlite

TIMELINE = (
    "Within about 20 minutes, heart rate and blood pressure begin to fall. Fig. 1 below sums it up.\n\n"
    "| Time after quitting | What happens |\n|---|---|\n"
    "| 20 minutes | Heart rate and blood pressure drop |\n"
    "| 12 hours | Carbon monoxide level in the blood drops to normal |"
)
HEADER = "| Time after quitting | What happens |"


def test_each_table_row_is_a_unit_under_its_header() -> None:
    assert split_units(TIMELINE) == [
        "Within about 20 minutes, heart rate and blood pressure begin to fall.",
        "Fig. 1 below sums it up.",
        f"{HEADER}\n| 20 minutes | Heart rate and blood pressure drop |",
        f"{HEADER}\n| 12 hours | Carbon monoxide level in the blood drops to normal |",
    ]
    assert split_units(HEADER) == [HEADER]  # a header alone
    assert anchor(split_units(TIMELINE)[2]) == "| 20 minutes | Heart rate and blood pressure drop |"
    assert cells(HEADER) == ["Time after quitting", "What happens"]


def test_list_items_are_units_and_no_sentence_absorbs_the_next_block() -> None:
    text = ("The standard schedule is:\n- Days 1 to 3: 0.5 mg once daily.\n- Day 8 onwards: 1 mg\n"
            "  twice daily. Take it after food.\n1. **Ask** about smoking\n\nA caption without a stop\n"
            "| A | B |\n| 1 | 2 |")
    assert split_units(text) == [
        "The standard schedule is:",
        "- Days 1 to 3: 0.5 mg once daily.",
        "- Day 8 onwards: 1 mg twice daily. Take it after food.",  # a wrapped line stays in its item
        "1. **Ask** about smoking",
        "A caption without a stop",  # not glued to the table under it
        "| A | B |\n| 1 | 2 |",
    ]


def test_join_writes_items_on_lines_and_rows_under_one_header() -> None:
    units = split_units(TIMELINE)
    assert join([units[0], units[2], units[3]]) == (
        f"{units[0]}\n\n{HEADER}\n| 20 minutes | Heart rate and blood pressure drop |\n"
        "| 12 hours | Carbon monoxide level in the blood drops to normal |")
    assert join(["Intro:", "- a one", "- b two", "After."]) == "Intro:\n- a one\n- b two\n\nAfter."
    # a list never runs on into another passage's
    assert join(["- a one", "- b two"], [1, 2]) == "- a one\n\n- b two"


def test_the_passage_units_of_the_citation_check_are_the_same() -> None:
    units = support.units(TIMELINE)
    assert units[:-1] == split_units(TIMELINE)
    assert units[-1] == " ".join(TIMELINE.split())  # the passage itself, white space folded


def cand(text: str, doc: str = "timeline.md") -> Candidate:
    return Candidate(Chunk(doc, 0, ("Timeline",), text, "Benefits"), 0.5)


def test_a_draft_sentence_stops_at_the_table_after_it_and_the_row_is_cited_with_its_header() -> None:
    context = [cand("Within about 20 minutes, heart rate and blood pressure begin to fall back "
                    "towards normal."), cand(TIMELINE)]
    draft = (f"Within about 20 minutes, heart rate and blood pressure begin to fall back towards "
             f"normal. [1]\n\n{HEADER}\n| 20 minutes | Heart rate and blood pressure drop | [2]")
    assert [cited for _, cited in citations.parse(draft)] == [(1,), (2,)]
    checked = citations.check(draft, context)
    assert not checked.dropped, checked.dropped
    assert checked.citations[1].quote == f"{HEADER}\n| 20 minutes | Heart rate and blood pressure drop |"
    assert checked.text.endswith(f"{HEADER}\n| 20 minutes | Heart rate and blood pressure drop | [2]")


def test_a_quote_is_the_units_that_support_the_answer_in_passage_order() -> None:
    passage = "Nausea is the most common side effect. Sleep may suffer. Headache is also common."
    checked = citations.check("Headache is also common [1]. Nausea is the most common side effect [1].",
                              [cand(passage)])
    assert checked.citations[0].quote == "Nausea is the most common side effect. Headache is also common."


def doc(*sections: Section) -> Document:
    return Document("guide.md", "Guide", sections, "guide.md")


def test_a_table_cut_in_pieces_repeats_its_header_in_each() -> None:
    rows = "\n".join(f"| {i} days | dose number {i} of the tablets |" for i in range(30))
    table = Section(("Doses",), (f"| Day | Dose |\n{rows}",), "table")
    chunks = SectionsChunker(lambda t: len(t.split()), 60).chunk(doc(table))
    assert len(chunks) > 1
    assert all(c.text.startswith("| Day | Dose |\n| ") for c in chunks)
    assert all(u.startswith("| Day | Dose |\n") for c in chunks for u in split_units(c.text))


def test_a_long_list_is_cut_at_its_items_and_window_chunks_keep_lines_and_paragraphs() -> None:
    items = "\n".join(f"- Step {i} is to do the thing number {i}." for i in range(30))
    chunks = SectionsChunker(lambda t: len(t.split()), 60).chunk(doc(Section(("Steps",), (items,))))
    assert len(chunks) > 1 and all(u.startswith("- Step ") for c in chunks for u in split_units(c.text))
    window = WindowChunker().chunk(doc(Section(("Steps",), ("Do this:", "- one thing\n- another", "Done."))))
    assert window[0].text == "Do this:\n\n- one thing\n- another\n\nDone."


def test_a_table_row_is_answered_and_quoted_with_its_header(tmp_path: Path) -> None:
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "plans.md").write_text(
        "# Plans\n\n## Monthly plans\n\nEvery plan can be cancelled at any time.\n\n"
        "| Plan | Price per month | Seats |\n|---|---|---|\n| Basic | 10 euros | 1 seat |\n"
        "| Team | 45 euros | 5 seats |\n")
    engine = Engine(open_sqlite(tmp_path / "t.db"))
    kb = engine.open_kb("t", embedder="hashing:256")
    gate = GateSetting("top1", 0.0, kb.config.embedder, kb.config.fingerprint(), "calibrated")
    kb = engine.store.update_kb("t", replace(kb.config, gate=gate))
    engine.ingest(kb, [folder])
    result = engine.ask(kb, "Team plan price per month 45 euros 5 seats")
    assert isinstance(result, Answer), result
    row = "| Plan | Price per month | Seats |\n| Team | 45 euros | 5 seats |"
    assert row in result.text and not result.dropped
    assert result.citations[0].quote.startswith(row)
    engine.store.close()
    shown = CliRunner().invoke(app, ["--db", str(tmp_path / "t.db"), "ask", "--kb", "t",
                                     "Team plan price per month 45 euros 5 seats"]).output
    assert "      | Plan | Price per month | Seats |\n      | Team | 45 euros | 5 seats |" in shown


def test_split_units_hands_each_caller_a_list_of_its_own() -> None:
    text = "First sentence here. Second one follows."
    mine = split_units(text)
    mine.append("changed by a caller")
    assert split_units(text) == ["First sentence here.", "Second one follows."]
