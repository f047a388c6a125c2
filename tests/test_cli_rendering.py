"""An answer drawn on a terminal: its tables get a header rule and keep every citation in a
cell, its lists stay lists; off a terminal the text is printed as it is."""

from __future__ import annotations

from rich.console import Console
from rich.markdown import Markdown

from citewise.cli import rendering

ANSWER = """Patches come in 24-hour and 16-hour versions [1].

| Product | Strengths | Typical use |
| Patch (24-hour) | 21 mg, 14 mg, 7 mg | 21 mg for 6 weeks | [2]
| Patch (16-hour) | 25 mg, 15 mg | 25 mg for 8 weeks | [2][3]

The schedule is: [4]
- Days 1 to 3: 0.5 mg once daily [4].
- Day 8 onwards: 1 mg twice daily [4]."""


def drawn(text: str) -> str:
    console = Console(record=True, width=120, color_system=None)
    console.print(Markdown(rendering.markdown(text)))
    return console.export_text()


def test_a_table_gets_its_header_rule_and_keeps_its_citations() -> None:
    md = rendering.markdown(ANSWER).splitlines()
    assert md[3] == "| --- | --- | --- |"
    assert md[4].endswith("| 21 mg for 6 weeks [2] |") and md[5].endswith("| 25 mg for 8 weeks [2][3] |")
    shown = drawn(ANSWER)
    assert "─" in shown and "Product" in shown and "| Patch" not in shown  # a drawn table
    assert all(f"[{n}]" in shown for n in (1, 2, 3, 4))


def test_lists_and_prose_are_left_as_written() -> None:
    md = rendering.markdown(ANSWER)
    assert "- Days 1 to 3: 0.5 mg once daily [4]." in md and md.startswith("Patches come in")
    assert "• Days 1 to 3" in drawn(ANSWER)
    assert rendering.markdown("No table here [1].") == "No table here [1]."


def test_a_table_with_its_rule_is_not_given_a_second() -> None:
    text = "| a | b |\n| --- | --- |\n| 1 | 2 | [1]"
    assert rendering.markdown(text).splitlines() == ["| a | b |", "| --- | --- |", "| 1 | 2 [1] |"]


def test_off_a_terminal_the_text_is_printed_as_it_is(capsys) -> None:
    rendering.echo_answer(ANSWER)
    assert capsys.readouterr().out == ANSWER + "\n"
