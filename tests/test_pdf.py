"""PDFs keep their structure: headings from the outline or from font size and weight, never
glued to a sentence; paragraphs, lists and table rows; running headers gone. Every PDF here
is made by the test (tests/pdfmaker.py)."""

from pathlib import Path

from citewise.ingest.documents import load
from citewise.ingest.loaders import read_pdf
from tests.pdfmaker import Pdf

LOREM = ["Descaling keeps the boiler free of lime and the coffee hot.",
         "Run the descaler through the group head and the steam wand,",
         "then rinse with two full tanks of fresh water."]


def _sections(pdf: Pdf, outline: list[tuple[str, int, int]] | None = None):
    return read_pdf(pdf.build(outline), "manual.pdf")


def test_headings_from_font_size_and_weight_become_sections() -> None:
    pdf = Pdf()
    p = pdf.page()
    p.text(72, 740, "Espresso Machine Guide", 22, bold=True)
    p.text(72, 700, "Care", 16, bold=True)
    p.text(72, 676, "Returns", 11, bold=True)  # bold at body size: the lowest level
    p.lines(72, 660, ["Unused machines can be returned within 30 days. Bring the re-",
                      "ceipt and the original box."])
    p.text(72, 610, "Descaling", 11, bold=True)
    p.lines(72, 594, LOREM)
    p.text(72, 530, "Warranty", 16, bold=True)
    p.lines(72, 510, ["Two years on parts and labour."])
    title, sections = _sections(pdf)
    assert title == "Espresso Machine Guide"
    assert [s.heading for s in sections] == [
        ("Care", "Returns"), ("Care", "Descaling"), ("Warranty",),
    ]
    assert sections[0].paragraphs == (
        "Unused machines can be returned within 30 days. Bring the receipt and the original box.",
    )
    assert sections[1].paragraphs == (" ".join(LOREM),)
    assert not any(p.startswith(("Returns Unused", "Descaling Descaling"))
                   for s in sections for p in s.paragraphs)


def test_metadata_title_wins_and_a_wrapped_heading_is_one_heading() -> None:
    pdf = Pdf(title="Barista Pro manual")
    p = pdf.page()
    p.text(72, 740, "Cleaning the milk system after", 16, bold=True)
    p.text(72, 722, "every use", 16, bold=True)
    p.lines(72, 700, ["Purge the wand for two seconds."])
    title, sections = _sections(pdf)
    assert title == "Barista Pro manual"
    assert [s.heading for s in sections] == [("Cleaning the milk system after every use",)]


def test_outline_gives_the_headings_when_the_fonts_do_not() -> None:
    pdf = Pdf()
    p1 = pdf.page()
    p1.lines(72, 740, ["1 Dosing", "Start with 0.5 mg once a day for three days.", "",
                       "2 Side effects", "Nausea is the most common side effect."])
    p2 = pdf.page()
    y = p2.lines(72, 740, ["2.1 Sleep", "Vivid dreams are reported by one in ten people."])
    p2.text(72, y, "Tips", bold=True)  # a heading the outline leaves out
    y = p2.lines(72, y - 14, ["Take it in the morning.", "", "3 Stopping treatment"])
    p2.lines(72, y, ["early", "Most people take it for twelve weeks."])
    outline = [("Dosing", 0, 0), ("Side effects", 0, 0), ("Sleep", 1, 1), ("Missing", 1, 0),
               ("Stopping treatment early", 1, 0)]
    title, sections = _sections(pdf, outline)
    assert title == "manual.pdf"
    assert [(s.heading, s.paragraphs) for s in sections] == [
        (("1 Dosing",), ("Start with 0.5 mg once a day for three days.",)),
        (("2 Side effects",), ("Nausea is the most common side effect.",)),
        (("2 Side effects", "2.1 Sleep"), ("Vivid dreams are reported by one in ten people.",
                                           "Tips", "Take it in the morning.")),
        (("3 Stopping treatment early",), ("Most people take it for twelve weeks.",)),
    ]


def test_two_columns_read_column_by_column_and_a_paragraph_runs_on() -> None:
    pdf = Pdf()
    p = pdf.page()
    p.text(72, 740, "Field notes", 20, bold=True)
    p.text(72, 700, "Left topic", 14, bold=True)
    p.lines(72, 680, ["The left column starts here", "and its paragraph runs down", "to the foot of"])
    p.lines(320, 680, ["the column and on to the", "top of the right column."])
    p.text(320, 630, "Right topic", 14, bold=True)
    p.lines(320, 610, ["The right column ends here."])
    title, sections = _sections(pdf)
    assert title == "Field notes"
    assert [(s.heading, s.paragraphs) for s in sections] == [
        (("Left topic",), ("The left column starts here and its paragraph runs down to the foot "
                           "of the column and on to the top of the right column.",)),
        (("Right topic",), ("The right column ends here.",)),
    ]


def test_a_table_keeps_its_rows_and_a_list_its_items() -> None:
    pdf = Pdf()
    p = pdf.page()
    p.text(72, 740, "Prices", 16, bold=True)
    for i, row in enumerate([("Model", "Price", "Warranty"), ("Barista", "$499", "2 years"),
                             ("Barista Pro", "$799", "3 years")]):
        for x, cell in zip((72, 250, 400), row, strict=True):
            p.text(x, 716 - 14 * i, cell, bold=i == 0)
    p.text(72, 640, "Cleaning", 16, bold=True)
    p.lines(72, 620, ["Each week:", "• Soak the portafilter", "• Wipe the wand"])
    p.lines(72, 578, ["Then rinse."])
    _, sections = _sections(pdf)
    prices, cleaning = sections
    assert prices.kind == "table"
    assert prices.paragraphs == (
        "| Model | Price | Warranty |\n| Barista | $499 | 2 years |\n| Barista Pro | $799 | 3 years |",
    )
    assert cleaning.paragraphs == ("Each week:", "• Soak the portafilter\n• Wipe the wand",
                                   "Then rinse.")


def test_running_headers_and_page_numbers_go() -> None:
    pdf = Pdf()
    for n, topic in enumerate(["Grinding", "Tamping", "Brewing"], 1):
        p = pdf.page()
        p.text(72, 770, "Barista Pro manual - confidential", 9)
        p.text(72, 720, topic, 16, bold=True)
        p.lines(72, 700, [f"How to do the {topic.lower()} well."])
        p.text(300, 40, str(n), 9)
    title, sections = _sections(pdf)
    assert [s.heading for s in sections] == [("Grinding",), ("Tamping",), ("Brewing",)]
    text = " ".join(p for s in sections for p in s.paragraphs)
    assert "confidential" not in text and not any(ch.isdigit() for ch in text)


def test_without_headings_a_section_a_page(tmp_path: Path) -> None:
    pdf = Pdf()
    pdf.page().lines(72, 740, ["Plain text with no heading at all.", "A second line of it."])
    pdf.page().lines(72, 740, ["The second page."])
    (tmp_path / "plain.pdf").write_bytes(pdf.build())
    doc = load(tmp_path / "plain.pdf", tmp_path)
    assert [(s.heading, s.paragraphs) for s in doc.sections] == [
        (("Page 1",), ("Plain text with no heading at all. A second line of it.",)),
        (("Page 2",), ("The second page.",)),
    ]
