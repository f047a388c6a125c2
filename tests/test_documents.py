from pathlib import Path

import pytest

from citewise.errors import DocumentError
from citewise.ingest.documents import Skipped, load, parse_markdown, walk


def make_pdf(path: Path, lines: list[str]) -> None:
    """A one-page PDF with a text stream, written by hand (no PDF writer dependency)."""
    ops = "BT /F1 12 Tf 72 720 Td 14 TL " + " ".join(f"({ln}) Tj T*" for ln in lines) + " ET"
    objects = [
        "<< /Type /Catalog /Pages 2 0 R >>",
        "<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R "
        "/Resources << /Font << /F1 5 0 R >> >> >>",
        f"<< /Length {len(ops)} >>\nstream\n{ops}\nendstream",
        "<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    out, offsets = b"%PDF-1.4\n", []
    for i, obj in enumerate(objects, 1):
        offsets.append(len(out))
        out += f"{i} 0 obj\n{obj}\nendobj\n".encode()
    xref = len(out)
    out += f"xref\n0 {len(objects) + 1}\n0000000000 65535 f \n".encode()
    out += b"".join(f"{o:010d} 00000 n \n".encode() for o in offsets)
    out += f"trailer\n<< /Size {len(objects) + 1} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n".encode()
    path.write_bytes(out)


def test_markdown_sections_tree_lists_and_tables() -> None:
    title, sections = parse_markdown(
        "# Varenicline\n\nIntro text.\n\n## Dosing\n\nThe schedule is:\n\n- Day 1: 0.5 mg\n"
        "- Day 8: 1 mg\n\n### Kidneys\n\nLower dose.\n\n## Prices\n\n| a | b |\n|---|---|\n"
        "| 1 | 2 |\n\n## FAQ\n\n### Can I drink?\n\nIn moderation.\n",
        "fallback",
    )
    assert title == "Varenicline"
    assert [s.heading for s in sections] == [
        (), ("Dosing",), ("Dosing", "Kidneys"), ("Prices",), ("FAQ", "Can I drink?"),
    ]
    assert sections[1].paragraphs == ("The schedule is:", "- Day 1: 0.5 mg\n- Day 8: 1 mg")
    assert sections[3].kind == "table" and sections[3].paragraphs == ("| a | b |\n| 1 | 2 |",)
    assert sections[4].kind == "faq"


def test_text_html_pdf_docx(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("First paragraph\nwrapped.\n\nSecond one.")
    (tmp_path / "b.html").write_text(
        "<html><head><title>Quitlines</title><script>alert(1)</script></head><body>"
        "<h2>Calling</h2><p>Call the quitline.</p><nav>menu</nav></body></html>"
    )
    make_pdf(tmp_path / "c.pdf", ["Nicotine patches release nicotine slowly."])
    import docx

    d = docx.Document()
    d.add_heading("Relapse", level=1)
    d.add_paragraph("Most relapses happen early.")
    d.save(str(tmp_path / "d.docx"))

    txt = load(tmp_path / "a.txt", tmp_path)
    assert txt.id == "a.txt" and txt.sections[0].paragraphs == ("First paragraph wrapped.", "Second one.")
    html = load(tmp_path / "b.html", tmp_path)
    assert html.title == "Quitlines"
    assert html.sections[0].heading == ("Calling",)
    assert "alert" not in html.text and "menu" not in html.text
    pdf = load(tmp_path / "c.pdf", tmp_path)
    assert "Nicotine patches release nicotine slowly." in pdf.text
    assert pdf.sections[0].heading == ("Page 1",)
    word = load(tmp_path / "d.docx", tmp_path)
    assert word.sections[0].heading == ("Relapse",) and "relapses happen early" in word.text


@pytest.mark.parametrize(
    ("name", "content", "reason"),
    [
        ("empty.md", b"", "empty file"),
        ("binary.txt", b"\x00\x01\x02abc", "binary"),
        ("latin1.txt", "caf\xe9".encode("latin-1"), "not UTF-8"),
        ("image.png", b"\x89PNG", "unsupported file type"),
        ("broken.pdf", b"%PDF-1.4 garbage", "PDF"),
        ("broken.docx", b"PK not really", "DOCX"),
        ("blank.md", b"   \n\n", "no text found"),
    ],
)
def test_bad_files_are_skipped_with_a_reason(
    tmp_path: Path, name: str, content: bytes, reason: str
) -> None:
    (tmp_path / name).write_bytes(content)
    (tmp_path / "good.md").write_text("# Good\n\nFine text.")
    results = list(walk([tmp_path]))
    skipped = [r for r in results if isinstance(r, Skipped)]
    assert [s.path for s in skipped] == [str(tmp_path / name)]
    assert reason in skipped[0].reason
    assert [r.id for r in results if not isinstance(r, Skipped)] == ["good.md"]
    with pytest.raises(DocumentError):
        load(tmp_path / name, tmp_path)


def test_ids_are_relative_paths_and_hidden_files_ignored(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "x.md").write_text("# X\n\ntext")
    (tmp_path / ".hidden.md").write_text("# H\n\ntext")
    assert [d.id for d in walk([tmp_path])] == ["sub/x.md"]
    assert isinstance(next(walk([tmp_path / "missing"])), Skipped)


def test_beir_corpus(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text(
        '{"_id": "1", "title": "T1", "text": "Body one."}\nnot json\n'
        '{"_id": "2", "title": "", "text": ""}\n{"_id": "3", "title": "T3", "text": "Body."}\n'
    )
    results = list(walk([corpus]))
    docs = [r for r in results if not isinstance(r, Skipped)]
    assert [(d.id, d.title) for d in docs] == [("1", "T1"), ("3", "T3")]
    assert len(results) - len(docs) == 2


def test_content_hash_changes_with_content() -> None:
    _, s1 = parse_markdown("# A\n\n## B\n\ntext", "x")
    _, s2 = parse_markdown("# A\n\n## B\n\ntext!", "x")
    from citewise.records import Document

    assert Document("a", "A", tuple(s1), "a").content_hash == Document("a", "A", tuple(s1), "a").content_hash
    assert Document("a", "A", tuple(s1), "a").content_hash != Document("a", "A", tuple(s2), "a").content_hash
