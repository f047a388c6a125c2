"""PDFs written by hand for the tests: pages of text placed by position, font size and weight,
an outline if asked for (no PDF-writing dependency; pypdf, which citewise reads with, adds the
outline)."""

from __future__ import annotations

import io
from dataclasses import dataclass, field


def _escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")


@dataclass
class Page:
    ops: list[str] = field(default_factory=list)

    def text(self, x: float, y: float, text: str, size: float = 11, bold: bool = False) -> Page:
        font = "F2" if bold else "F1"
        self.ops.append(f"BT /{font} {size} Tf {x} {y} Td ({_escape(text)}) Tj ET")
        return self

    def lines(self, x: float, y: float, lines: list[str], size: float = 11, leading: float = 14,
              bold: bool = False) -> float:
        """Lines one under another; returns the y below the last."""
        for line in lines:
            self.text(x, y, line, size, bold)
            y -= leading
        return y


@dataclass
class Pdf:
    pages: list[Page] = field(default_factory=list)
    title: str = ""

    def page(self) -> Page:
        self.pages.append(Page())
        return self.pages[-1]

    def build(self, outline: list[tuple[str, int, int]] | None = None) -> bytes:
        """The file's bytes; ``outline`` is ``(title, page index, depth)`` in order."""
        n = len(self.pages)
        fonts = 3 + 2 * n
        objects = [
            "<< /Type /Catalog /Pages 2 0 R >>",
            "<< /Type /Pages /Kids [" + " ".join(f"{3 + 2 * i} 0 R" for i in range(n))
            + f"] /Count {n} >>",
        ]
        for i, page in enumerate(self.pages):
            ops = "\n".join(page.ops).encode("cp1252").decode("latin-1")  # bytes as written
            objects.append(
                f"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents {4 + 2 * i} 0 R "
                f"/Resources << /Font << /F1 {fonts} 0 R /F2 {fonts + 1} 0 R >> >> >>"
            )
            objects.append(f"<< /Length {len(ops)} >>\nstream\n{ops}\nendstream")
        objects.append("<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica "
                       "/Encoding /WinAnsiEncoding >>")
        objects.append("<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica-Bold "
                       "/Encoding /WinAnsiEncoding >>")
        out, offsets = b"%PDF-1.4\n", []
        for i, obj in enumerate(objects, 1):
            offsets.append(len(out))
            out += f"{i} 0 obj\n{obj}\nendobj\n".encode("latin-1")
        xref = len(out)
        out += f"xref\n0 {len(objects) + 1}\n0000000000 65535 f \n".encode()
        out += b"".join(f"{o:010d} 00000 n \n".encode() for o in offsets)
        out += (f"trailer\n<< /Size {len(objects) + 1} /Root 1 0 R >>\nstartxref\n{xref}\n"
                "%%EOF\n").encode()
        if not outline and not self.title:
            return out
        from pypdf import PdfWriter

        writer = PdfWriter(clone_from=io.BytesIO(out))
        if self.title:
            writer.add_metadata({"/Title": self.title})
        parents: list[object] = []
        for title, page_index, depth in outline or []:
            parents = parents[:depth]
            parent = parents[-1] if parents else None
            parents.append(writer.add_outline_item(title=title, page_number=page_index, parent=parent))
        buf = io.BytesIO()
        writer.write(buf)
        return buf.getvalue()
