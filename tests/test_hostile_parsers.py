"""Hostile files: every reader, the sentence splitter and the chunkers stay linear on a megabyte
of pathological input; oversized, nested or broken files are one clear ``DocumentError``
naming the file by its id; ``citewise ingest`` skips them (and links out of the folder) with a
line each and carries on.

The time bounds are generous: the quadratic and cubic code these pin took minutes to hours on
these inputs. ``method="thread"``: a backtracking regular expression never returns to Python
for a signal to stop it.
"""

from __future__ import annotations

import io
import json
import os
import random
import string
import zipfile
import zlib
from pathlib import Path

import pytest
from typer.testing import CliRunner

from citewise.cli import app
from citewise.embedders.hashing import HashingEmbedder
from citewise.errors import DocumentError
from citewise.ingest.chunking import CHUNKERS, get_chunker
from citewise.ingest.documents import Skipped, beir_line, load, walk
from citewise.records import Document
from citewise.sentences import split_sentences

pytestmark = pytest.mark.heavy  # servers, processes, deadlines or megabytes: make test, not make unit

MB = 1024 * 1024
linear = pytest.mark.timeout(90, method="thread")
# abbreviations and initials that must not end a sentence, back to back
ABBREVIATIONS = "a. B Dr. C e.g. D J. E approx. F "
SPACES = " " * 3000  # a heading with this run inside took the old heading regex over a minute


def chunk_all(doc: Document) -> None:
    count = HashingEmbedder(64).count_tokens
    for name in CHUNKERS:
        assert get_chunker(name, count, 512).chunk(doc)


def make_pdf(streams: list[bytes]) -> bytes:
    """A PDF with one Flate-compressed content stream a page, written by hand."""
    objects = [b"<< /Type /Catalog /Pages 2 0 R >>", b"",
               b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>"]
    kids = []
    for ops in streams:
        data = zlib.compress(ops)
        kids.append(f"{len(objects) + 1} 0 R")
        objects.append(f"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents "
                       f"{len(objects) + 2} 0 R /Resources << /Font << /F1 3 0 R >> >> >>".encode())
        objects.append(f"<< /Length {len(data)} /Filter /FlateDecode >>\nstream\n".encode()
                       + data + b"\nendstream")
    objects[1] = f"<< /Type /Pages /Kids [{' '.join(kids)}] /Count {len(kids)} >>".encode()
    out, offsets = b"%PDF-1.4\n", []
    for i, obj in enumerate(objects, 1):
        offsets.append(len(out))
        out += f"{i} 0 obj\n".encode() + obj + b"\nendobj\n"
    xref = len(out)
    out += f"xref\n0 {len(objects) + 1}\n0000000000 65535 f \n".encode()
    out += b"".join(f"{o:010d} 00000 n \n".encode() for o in offsets)
    return out + (f"trailer\n<< /Size {len(objects) + 1} /Root 1 0 R >>\nstartxref\n{xref}\n"
                  "%%EOF\n").encode()


def make_docx(headings: list[str], paragraphs: list[str]) -> bytes:
    import docx

    d = docx.Document()
    for heading, text in zip(headings, paragraphs, strict=True):
        d.add_heading(heading, level=2)
        d.add_paragraph(text)
    out = io.BytesIO()
    d.save(out)
    return out.getvalue()


def rezip(raw: bytes, replace: dict[str, bytes], add: dict[str, bytes] | None = None) -> bytes:
    """The zip ``raw`` with members replaced or added, every member deflated."""
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(raw)) as src, zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as dst:
        for info in src.infolist():
            dst.writestr(info.filename, replace.get(info.filename, src.read(info.filename)))
        for name, data in (add or {}).items():
            dst.writestr(name, data)
    return out.getvalue()


# -- linear on a megabyte --------------------------------------------------------------------


@linear
def test_sentence_splitter_is_linear_on_abbreviation_runs() -> None:
    text = ABBREVIATIONS * (MB // len(ABBREVIATIONS)) + "End here. Next one."
    assert split_sentences(text) == [text[: -len(" Next one.")], "Next one."]


@linear
@pytest.mark.parametrize("chunker", list(CHUNKERS))
def test_chunkers_are_linear_under_a_long_heading(tmp_path: Path, chunker: str) -> None:
    # the heading is embedded with every piece: at 300 KB it was tokenized once a word
    body = "Nicotine gum helps cravings. " * (MB // 29)
    (tmp_path / "h.md").write_text(f"# Title\n\n## {'word ' * 60_000}\n\n{body}\n")
    doc = load(tmp_path / "h.md", tmp_path)
    chunks = get_chunker(chunker, HashingEmbedder(64).count_tokens, 512).chunk(doc)
    assert chunks and all("Nicotine gum" in c.text for c in chunks)
    assert len(doc.sections[0].heading[0]) == 500  # cut, with an ellipsis


@linear
def test_markdown_reader_is_linear(tmp_path: Path) -> None:
    parts = ["# Title\n\n"]
    while sum(map(len, parts)) < MB:
        parts += [f"## a{SPACES}b ##\n\n", "####### not a heading\n", "### Short\n\n",
                  "one wrapped\nline\n" * 200, "\n", ABBREVIATIONS * 100, "\n\n"]
    (tmp_path / "m.md").write_text("".join(parts))
    doc = load(tmp_path / "m.md", tmp_path)
    assert doc.title == "Title" and doc.sections[0].heading == ("a" + "…",)
    assert doc.sections[1].heading == ("a…", "Short")
    chunk_all(doc)


@linear
def test_text_reader_is_linear_on_one_long_wrapped_paragraph(tmp_path: Path) -> None:
    (tmp_path / "t.txt").write_text("Quit. Smoking\n" * (MB // 14) + ABBREVIATIONS * 10_000)
    doc = load(tmp_path / "t.txt", tmp_path)
    assert len(doc.sections[0].paragraphs) == 1
    chunk_all(doc)


@linear
def test_html_reader_is_linear(tmp_path: Path) -> None:
    block = ("<h2>Part</h2><p>" + ABBREVIATIONS * 30 + "</p><ul><li>one<ul><li>two<ul><li>three"
             "</li></ul></li></ul></li></ul><table><tr><td>cell</td><td>x</td></tr></table>")
    tail = "<h2>Last</h2><p>" + ABBREVIATIONS * 20_000 + "</p>"  # a section with no table rows
    page = "<html><body>" + block * (MB // len(block)) + tail + "</body></html>"
    (tmp_path / "p.html").write_text(page)
    doc = load(tmp_path / "p.html", tmp_path)
    assert doc.sections[0].paragraphs[1:3] == ("- one two three", "| cell | x |")
    chunk_all(doc)


@linear
def test_pdf_reader_is_linear(tmp_path: Path) -> None:
    line = f"({ABBREVIATIONS * 5}) Tj T* ".encode()
    page = b"BT /F1 12 Tf 72 720 Td 14 TL " + line * 400 + b" ET"
    (tmp_path / "d.pdf").write_bytes(make_pdf([page] * (MB // len(page) + 1)))
    doc = load(tmp_path / "d.pdf", tmp_path)
    assert doc.sections[0].heading == ("Page 1",) and "Dr. C e.g. D" in doc.text
    chunk_all(doc)


@linear
def test_docx_reader_is_linear_and_its_headings_too(tmp_path: Path) -> None:
    # initials ("J. Smith") of random letters: as slow to split as ABBREVIATIONS, but they do
    # not compress hundreds-fold as a repeated phrase does (that is refused as a zip bomb)
    rng = random.Random(7)
    n = MB // (len(SPACES) + 4000)
    paragraphs = [" ".join(f"{rng.choice(string.ascii_lowercase)}. {rng.choice(string.ascii_uppercase)}"
                           for _ in range(1000)) for _ in range(n)]
    (tmp_path / "w.docx").write_bytes(make_docx([f"a{SPACES}b"] * n, paragraphs))
    doc = load(tmp_path / "w.docx", tmp_path)
    assert doc.sections[0].heading == ("a…",)
    chunk_all(doc)


@linear
def test_beir_corpus_is_linear_on_a_long_line(tmp_path: Path) -> None:
    row = {"_id": "1", "title": "T " * 100_000, "text": ABBREVIATIONS * (MB // len(ABBREVIATIONS))}
    (tmp_path / "corpus.jsonl").write_text(json.dumps(row) + "\n")
    [doc] = walk([tmp_path / "corpus.jsonl"])
    assert isinstance(doc, Document)
    chunk_all(doc)
    assert len(doc.title) <= 500


# -- caps with a clear error, naming the file by its id --------------------------------------


@linear
def test_deeply_nested_html_is_refused(tmp_path: Path) -> None:
    (tmp_path / "n.html").write_text("<ul>" + "<li>x<ul>" * 100_000 + "</ul>")
    with pytest.raises(DocumentError, match=r"^n\.html: HTML elements nested over 200 deep"):
        load(tmp_path / "n.html", tmp_path)


@linear
def test_nested_html_blocks_that_repeat_the_text_are_refused(tmp_path: Path) -> None:
    nested = "<table><tr><td>" * 60 + "cell text " * 50 + "</td></tr></table>" * 60
    (tmp_path / "t.html").write_text("<body>" + nested * 20 + "</body>")
    with pytest.raises(DocumentError, match="repeat its text over 8 times"):
        load(tmp_path / "t.html", tmp_path)


def test_pdf_stream_inflating_past_the_limit_is_refused(tmp_path: Path) -> None:
    (tmp_path / "bomb.pdf").write_bytes(make_pdf([b" " * 80_000_000]))
    with pytest.raises(DocumentError, match=r"^bomb\.pdf: over a PDF reading limit") as e:
        load(tmp_path / "bomb.pdf", tmp_path)
    assert str(tmp_path) not in str(e.value)


def test_docx_with_broken_xml_is_a_document_error_naming_its_id(tmp_path: Path) -> None:
    raw = make_docx(["Relapse"], ["Most relapses happen early."])
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "broken.docx").write_bytes(
        rezip(raw, {"word/document.xml": b"<w:document><w:body><w:p>unclosed"})
    )
    with pytest.raises(DocumentError) as e:
        load(tmp_path / "sub" / "broken.docx", tmp_path)
    assert e.value.file == "sub/broken.docx" and "not a readable DOCX file" in e.value.reason
    assert str(e.value).startswith("sub/broken.docx: ") and str(tmp_path) not in str(e.value)


@pytest.mark.parametrize(
    ("name", "content", "reason"),
    [
        ("x.docx", b"PK not really", "not a readable DOCX file"),  # named the path it was given
        ("x.docx", b"plain words", "not a readable DOCX file"),
        ("x.pdf", b"%PDF-1.4 garbage", "not a readable PDF file"),
        ("x.md", b"", "empty file"),
        ("x.txt", b"\xff\xfe", "not UTF-8"),
    ],
)
def test_every_loader_failure_names_the_file_by_its_id_only(
    tmp_path: Path, name: str, content: bytes, reason: str
) -> None:
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / name).write_bytes(content)
    with pytest.raises(DocumentError) as e:
        load(tmp_path / "sub" / name, tmp_path)
    assert str(e.value).startswith(f"sub/{name}: {reason}"), str(e.value)
    assert str(tmp_path) not in str(e.value)


def test_docx_zip_bomb_is_refused_from_its_central_directory(tmp_path: Path) -> None:
    raw = make_docx(["Relapse"], ["Most relapses happen early."])
    with zipfile.ZipFile(io.BytesIO(raw)) as z:
        xml = z.read("word/document.xml")
    padded = xml.replace(b"<w:body>", b"<w:body>" + b" " * 20 * MB, 1)
    (tmp_path / "bomb.docx").write_bytes(rezip(raw, {"word/document.xml": padded}))
    assert (tmp_path / "bomb.docx").stat().st_size < 200_000
    with pytest.raises(DocumentError, match=r"^bomb\.docx: part word/document\.xml would inflate"):
        load(tmp_path / "bomb.docx", tmp_path)


@pytest.mark.parametrize(
    ("noise", "zeros", "count", "message"),
    [  # XML-like parts (compressible) have a lower cap than images (barely compressible)
        (1024, 48 * 1024, 420, r"its text and XML parts inflate to 2\d MB, over the 16 MB limit"),
        (2048, 3072, 13_400, r"inflates to 6\d MB, over the 64 MB limit"),
    ],
)
def test_docx_over_its_uncompressed_size_caps_is_refused(
    tmp_path: Path, noise: int, zeros: int, count: int, message: str
) -> None:
    pad = b"".join(os.urandom(noise) + bytes(zeros) for _ in range(count))
    raw = make_docx(["Relapse"], ["Most relapses happen early."])
    (tmp_path / "big.docx").write_bytes(rezip(raw, {}, {"word/media/pad.bin": pad}))
    with pytest.raises(DocumentError, match=rf"^big\.docx: {message}"):
        load(tmp_path / "big.docx", tmp_path)


def test_nul_characters_and_lone_surrogates_never_reach_a_store(tmp_path: Path) -> None:
    (tmp_path / "late-nul.md").write_bytes(b"# T\n\n" + b"text " * 3000 + b"\x00 more")
    with pytest.raises(DocumentError, match=r"^late-nul\.md: looks binary"):
        load(tmp_path / "late-nul.md", tmp_path)
    line = json.dumps({"_id": "7\u0000", "title": "Ti\ud800tle", "text": "Nico\u0000tine \udfff gum."})
    doc = beir_line(tmp_path / "corpus.jsonl", 1, line)
    assert isinstance(doc, Document)
    assert (doc.id, doc.title, doc.text) == ("7", "Title", "Nicotine  gum.")
    assert doc.content_hash  # encodable as UTF-8


# -- the CLI skips a bad file, or a link out of the folder, with one line --------------------

runner = CliRunner()


def test_cli_ingest_skips_bad_docx_files_and_goes_on(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "good.md").write_text("# Good\n\n## Part\n\nNicotine gum helps cravings.")
    raw = make_docx(["Relapse"], ["Most relapses happen early."])
    (docs / "broken.docx").write_bytes(rezip(raw, {"word/document.xml": b"<w:document"}))
    (docs / "bomb.pdf").write_bytes(make_pdf([b" " * 80_000_000]))
    r = runner.invoke(app, ["--db", str(tmp_path / "kb.db"), "ingest", "--kb", "s", "--embedder",
                            "hashing:64", "-q", str(docs)])
    assert r.exit_code == 0, r.output  # today's convention: skips are reported, not an error
    lines = [ln for ln in r.output.splitlines() if ln.startswith("skipped ")]
    assert len(lines) == 2 and "1 added" in r.output and "2 skipped" in r.output
    assert lines[0].startswith(f"skipped {docs / 'bomb.pdf'}: over a PDF reading limit")
    assert lines[1].startswith(f"skipped {docs / 'broken.docx'}: not a readable DOCX file")


def test_api_upload_of_a_hostile_file_is_a_422_naming_it_not_a_500(tmp_path: Path) -> None:
    from fastapi.testclient import TestClient

    from tests.api_fixtures import make_app, settings_for, tenant, upload

    raw = make_docx(["Relapse"], ["Most relapses happen early."])
    with TestClient(make_app(settings_for(tmp_path / "api.db")), raise_server_exceptions=False) as client:
        acme = tenant(client, "acme")
        client.post("/v1/kbs", json={"name": "docs"}, headers=acme.headers)
        for name, data, reason in [
            ("bomb.pdf", make_pdf([b" " * 80_000_000]), "over a PDF reading limit"),
            ("broken.docx", rezip(raw, {"word/document.xml": b"<w:document"}), "not a readable DOCX"),
        ]:
            r = upload(client, acme, "docs", {name: data})
            assert r["status"] == 422 and reason in r["files"][0]["reason"], r
            assert "citewise-upload" not in r["files"][0]["reason"]


def test_links_out_of_the_folder_are_skipped_and_links_inside_followed(tmp_path: Path) -> None:
    outside, docs = tmp_path / "outside", tmp_path / "docs"
    outside.mkdir()
    docs.mkdir()
    (outside / "secret.md").write_text("# Secret\n\nThe launch code is zebra.")
    (docs / "real").mkdir()
    (docs / "real" / "inside.md").write_text("# Inside\n\nNicotine gum helps cravings.")
    (docs / "leak.md").symlink_to(outside / "secret.md")
    (docs / "leakdir").symlink_to(outside, target_is_directory=True)
    (docs / "alias.md").symlink_to(docs / "real" / "inside.md")
    (docs / "real" / "loop").symlink_to(docs, target_is_directory=True)
    (docs / "same").symlink_to(docs / "real", target_is_directory=True)
    results = list(walk([docs]))
    loaded = sorted(r.id for r in results if isinstance(r, Document))
    assert loaded == ["alias.md", "real/inside.md", "same/inside.md"]
    skipped = {Path(r.path).name: r.reason for r in results if isinstance(r, Skipped)}
    assert skipped.keys() == {"leak.md", "leakdir", "loop"}
    assert skipped["leak.md"] == "a link to outside the folder; not followed"
    r = runner.invoke(app, ["--db", str(tmp_path / "kb.db"), "ingest", "--kb", "s", "--embedder",
                            "hashing:64", "-q", str(docs)])
    assert r.exit_code == 0 and f"skipped {docs / 'leak.md'}: a link to outside" in r.output
    shown = json.loads(runner.invoke(app, ["--db", str(tmp_path / "kb.db"), "kb", "show", "s",
                                           "--json"]).output)
    assert "zebra" not in json.dumps(shown) and len(shown["documents"]) == 3


@linear
def test_pdf_layout_is_linear_in_runs_and_outline_entries() -> None:
    from citewise.ingest import pdf_layout

    one_line = [pdf_layout.Run("a-", 72 + i, 700, 11, False) for i in range(200_000)]
    assert len(pdf_layout.lines(one_line, 0)) == 1
    many = [[pdf_layout.Line((f"line {i}-",), 72, 700 - i % 50, 11, False, p) for i in range(20_000)]
            for p in range(5)]
    outline = [pdf_layout.OutlineEntry(f"entry {i}", None, 0) for i in range(2_000)]
    text = pdf_layout.markdown(many, outline, "", "d")
    assert text.startswith("# d") and len(text) > 100_000
