"""Write a simple Markdown-like text file as a Word document (.docx) with python-docx.

    python benchmarks/collections/make_docx.py SOURCE.md OUT.docx

The source is one block a line:

    # Heading        Heading 1 (the first one is also the document's title property)
    ## Subheading    Heading 2
    - item           a List Bullet paragraph
    | a | b |        a table row; consecutive rows make one table, the first row is its header
    any other line   a Normal paragraph
    (blank line)     ignored

Nothing else (bold, links, numbering) is interpreted: the text is written as it stands.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from docx import Document


def cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split("|")]


def build(source: str, out: Path) -> None:
    doc = Document()
    rows: list[list[str]] = []

    def flush_table() -> None:
        if not rows:
            return
        table = doc.add_table(rows=len(rows), cols=max(len(r) for r in rows))
        table.style = "Table Grid"
        for i, row in enumerate(rows):
            for j, text in enumerate(row):
                cell = table.cell(i, j)
                cell.text = text
                if i == 0:
                    for run in cell.paragraphs[0].runs:
                        run.bold = True
        rows.clear()

    for line in source.splitlines():
        line = line.rstrip()
        if line.startswith("|"):
            rows.append(cells(line))
            continue
        flush_table()
        if not line:
            continue
        if line.startswith("## "):
            doc.add_heading(line[3:].strip(), level=2)
        elif line.startswith("# "):
            if not doc.core_properties.title:
                doc.core_properties.title = line[2:].strip()
            doc.add_heading(line[2:].strip(), level=1)
        elif line.startswith("- "):
            doc.add_paragraph(line[2:].strip(), style="List Bullet")
        else:
            doc.add_paragraph(line.strip())
    flush_table()
    out.parent.mkdir(parents=True, exist_ok=True)
    doc.save(str(out))


def main() -> None:
    ap = argparse.ArgumentParser(description="Write a Markdown-like text file as a .docx")
    ap.add_argument("source", type=Path, help="'# ' and '## ' headings, '- ' bullets, '|' table rows")
    ap.add_argument("out", type=Path, help="the .docx to write")
    args = ap.parse_args()
    build(args.source.read_text(encoding="utf-8"), args.out)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
