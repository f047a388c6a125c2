"""Write a plain text file as a simple multi-page PDF, with no PDF library.

    python benchmarks/collections/make_pdf.py SOURCE.txt OUT.pdf

The source is one block a line:

    # Heading        the first one is the document title (18 pt), later ones headings (14 pt bold)
    ## Subheading    11.5 pt bold
    - item           a bullet, wrapped with a hanging indent
    any other line   a paragraph, wrapped to the page width
    (blank line)     a little vertical space

The PDF is as plain as a PDF gets, so that any extractor reads it: US Letter pages, uncompressed
content streams, the standard Helvetica and Helvetica-Bold Type1 fonts in WinAnsiEncoding (the
text must be encodable as cp1252), every line drawn by its own BT/Tf/Td/Tj/ET at an absolute
position, a footer with the title and page number, and a classic xref table with byte offsets.
Lines are wrapped with Helvetica's glyph widths.
"""

from __future__ import annotations

import argparse
import textwrap
from pathlib import Path

PAGE_W, PAGE_H = 612, 792  # US Letter, points
MARGIN_X, TOP, BOTTOM = 72, 720, 72
BODY, SUB, HEAD, TITLE, FOOT = 10, 11.5, 14, 18, 8
BULLET_X, BULLET_TEXT_X = MARGIN_X + 8, MARGIN_X + 20

# Helvetica advance widths (1/1000 em) for printable ASCII, from the standard AFM
_W = [278, 278, 355, 556, 556, 889, 667, 191, 333, 333, 389, 584, 278, 333, 278, 278,
      556, 556, 556, 556, 556, 556, 556, 556, 556, 556, 278, 278, 584, 584, 584, 556,
      1015, 667, 667, 722, 722, 667, 611, 778, 722, 278, 500, 667, 556, 833, 722, 778,
      667, 778, 722, 667, 611, 722, 667, 944, 667, 667, 611, 278, 278, 278, 469, 556,
      333, 556, 556, 500, 556, 556, 278, 556, 556, 222, 222, 500, 222, 833, 556, 556,
      556, 556, 333, 500, 278, 556, 500, 722, 500, 500, 500, 334, 260, 334, 584]
WIDTHS = {chr(32 + i): w for i, w in enumerate(_W)}


def text_width(text: str, size: float, bold: bool = False) -> float:
    em = sum(WIDTHS.get(ch, 556) for ch in text) / 1000 * size
    return em * 1.08 if bold else em  # Helvetica-Bold is a little wider; close enough to wrap


def wrap(text: str, width: float, size: float, bold: bool = False) -> list[str]:
    lines: list[str] = []
    for word in text.split():
        if lines and text_width(lines[-1] + " " + word, size, bold) <= width:
            lines[-1] += " " + word
        else:
            lines.append(word)
    return lines or [""]


def pdf_string(text: str) -> bytes:
    raw = text.encode("cp1252")
    return b"(" + raw.replace(b"\\", b"\\\\").replace(b"(", b"\\(").replace(b")", b"\\)") + b")"


def layout(source: str) -> tuple[str, list[list[tuple[str, float, float, float, str]]]]:
    """The title and the pages, each a list of (font, size, x, y, text) draws."""
    pages: list[list] = [[]]
    y = TOP
    title = ""
    text_w = PAGE_W - 2 * MARGIN_X

    def room(height: float) -> None:
        nonlocal y
        if y - height < BOTTOM:
            pages.append([])
            y = TOP

    def draw(font: str, size: float, x: float, text: str) -> None:
        nonlocal y
        pages[-1].append((font, size, x, y, text))

    for line in source.splitlines():
        line = line.rstrip()
        if not line:
            y -= BODY * 0.6
        elif line.startswith("# ") and not title:
            title = line[2:].strip()
            for part in wrap(title, text_w, TITLE, True):
                draw("F2", TITLE, MARGIN_X, part)
                y -= TITLE * 1.4
            y -= 4
        elif line.startswith(("# ", "## ")):
            size = HEAD if line.startswith("# ") else SUB
            text = line.split(" ", 1)[1].strip()
            y -= size * 0.8  # space above a heading
            room(size * 1.4 + BODY * 1.35 * 3)  # keep a heading with the lines below it
            for part in wrap(text, text_w, size, True):
                draw("F2", size, MARGIN_X, part)
                y -= size * 1.4
        elif line.startswith("- "):
            parts = wrap(line[2:], PAGE_W - MARGIN_X - BULLET_TEXT_X, BODY)
            for i, part in enumerate(parts):
                room(BODY * 1.35)
                if i == 0:
                    draw("F1", BODY, BULLET_X, "\u2022")
                draw("F1", BODY, BULLET_TEXT_X, part)
                y -= BODY * 1.35
        else:
            for part in wrap(line, text_w, BODY):
                room(BODY * 1.35)
                draw("F1", BODY, MARGIN_X, part)
                y -= BODY * 1.35
            y -= BODY * 0.4  # paragraph spacing
    return title, [p for p in pages if p]


def build(source: str) -> bytes:
    title, pages = layout(source)
    # object numbers: 1 catalog, 2 pages, 3 Helvetica, 4 Helvetica-Bold, 5 info, then page + content pairs
    first = 6
    page_ids = [first + 2 * i for i in range(len(pages))]
    objects: dict[int, bytes] = {
        1: b"<< /Type /Catalog /Pages 2 0 R >>",
        2: b"<< /Type /Pages /Kids [" + b" ".join(b"%d 0 R" % p for p in page_ids)
           + b"] /Count %d >>" % len(pages),
        3: b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>",
        4: b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica-Bold /Encoding /WinAnsiEncoding >>",
        5: b"<< /Title " + pdf_string(title) + b" /Producer (make_pdf.py) >>",
    }
    for n, (page_id, draws) in enumerate(zip(page_ids, pages, strict=True), 1):
        footer = f"{title}  |  Page {n} of {len(pages)}"
        fx = (PAGE_W - text_width(footer, FOOT)) / 2
        ops = [b"BT /%s %g Tf %.2f %.2f Td %s Tj ET" % (font.encode(), size, x, y, pdf_string(text))
               for font, size, x, y, text in [*draws, ("F1", FOOT, fx, 40, footer)]]
        stream = b"\n".join(ops) + b"\n"
        objects[page_id] = (b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 %d %d] " % (PAGE_W, PAGE_H)
                            + b"/Resources << /Font << /F1 3 0 R /F2 4 0 R >> >> "
                            + b"/Contents %d 0 R >>" % (page_id + 1))
        objects[page_id + 1] = b"<< /Length %d >>\nstream\n" % len(stream) + stream + b"endstream"

    out = bytearray(b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n")
    offsets = {}
    for num in sorted(objects):
        offsets[num] = len(out)
        out += b"%d 0 obj\n" % num + objects[num] + b"\nendobj\n"
    xref = len(out)
    size = max(objects) + 1
    out += b"xref\n0 %d\n0000000000 65535 f \n" % size
    for num in range(1, size):
        out += b"%010d 00000 n \n" % offsets[num]
    out += b"trailer\n<< /Size %d /Root 1 0 R /Info 5 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (size, xref)
    return bytes(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=textwrap.dedent(__doc__).split("\n\n")[0])
    ap.add_argument("source", type=Path, help="text file: '# ' headings, '- ' bullets, paragraphs")
    ap.add_argument("out", type=Path, help="the PDF to write")
    args = ap.parse_args()
    data = build(args.source.read_text(encoding="utf-8"))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_bytes(data)
    print(f"wrote {args.out} ({len(data):,} bytes)")


if __name__ == "__main__":
    main()
