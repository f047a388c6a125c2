"""Check the collections' labelled questions against their documents (cheap: no model, no index).

    python benchmarks/collections/check.py

For every collection folder beside this file: reads docs/ as plain text (PDF through pypdf,
DOCX through python-docx paragraphs and table cells, HTML with the tags stripped, Markdown and
text as they are), then checks questions.jsonl: ids unique and prefixed alike, ``expect`` matching
the bucket, every listed source present in docs/, and every ``must_contain`` string found verbatim
(whitespace normalised) in one of the question's sources. Prints the questions per bucket and
the words per collection; exits 1 if anything is wrong.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections import Counter
from html.parser import HTMLParser
from pathlib import Path

HERE = Path(__file__).resolve().parent
EXPECT = {"covered": "answer", "thin": "refuse", "out_of_scope": "refuse"}


class _Text(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self.skip = 0

    def handle_starttag(self, tag: str, attrs: list) -> None:
        self.skip += tag in ("script", "style")
        self.parts.append(" ")

    def handle_endtag(self, tag: str) -> None:
        self.skip -= tag in ("script", "style")
        self.parts.append(" ")

    def handle_data(self, data: str) -> None:
        if not self.skip:
            self.parts.append(data)


def doc_text(path: Path) -> str:
    suffix = path.suffix.lower()
    if suffix == ".pdf":
        from pypdf import PdfReader
        return "\n".join(page.extract_text() for page in PdfReader(path).pages)
    if suffix == ".docx":
        import docx
        d = docx.Document(str(path))
        cells = [c.text for t in d.tables for row in t.rows for c in row.cells]
        return "\n".join([p.text for p in d.paragraphs] + cells)
    if suffix in (".html", ".htm"):
        parser = _Text()
        parser.feed(path.read_text(encoding="utf-8"))
        return "".join(parser.parts)
    return path.read_text(encoding="utf-8")


def norm(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


def check(folder: Path) -> tuple[Counter, int, list[str]]:
    texts = {p.name: norm(doc_text(p)) for p in sorted((folder / "docs").iterdir()) if p.is_file()}
    rows = [json.loads(line) for line in (folder / "questions.jsonl").read_text(encoding="utf-8").splitlines()
            if line.strip()]
    problems = []
    ids = [r["id"] for r in rows]
    if len(set(ids)) != len(ids) or len({i[:2] for i in ids}) != 1:
        problems.append("ids are not unique or do not share one prefix")
    for r in rows:
        if EXPECT.get(r["bucket"]) != r["expect"]:
            problems.append(f"{r['id']}: bucket {r['bucket']} with expect {r['expect']}")
        if r["expect"] == "refuse":
            if r["sources"] or r.get("must_contain"):
                problems.append(f"{r['id']}: a refusal lists sources or must_contain")
            continue
        missing = [s for s in r["sources"] if s not in texts]
        if missing or not r["sources"]:
            problems.append(f"{r['id']}: sources not in docs/: {missing or 'none listed'}")
        for fact in r.get("must_contain") or ["(none)"]:
            if not any(norm(fact) in texts.get(s, "") for s in r["sources"]):
                problems.append(f"{r['id']}: must_contain {fact!r} not found in {r['sources']}")
    words = sum(len(t.split()) for t in texts.values())
    return Counter(r["bucket"] for r in rows), words, problems


def main() -> None:
    argparse.ArgumentParser(description="Check the questions against their documents").parse_args()
    failed = False
    print(f"{'collection':<16} {'covered':>7} {'thin':>5} {'out_of_scope':>12} {'words':>6}  problems")
    for folder in sorted(p for p in HERE.iterdir() if (p / "questions.jsonl").exists()):
        buckets, words, problems = check(folder)
        print(f"{folder.name:<16} {buckets['covered']:>7} {buckets['thin']:>5} {buckets['out_of_scope']:>12} "
              f"{words:>6}  {len(problems)}")
        for p in problems:
            print("    " + p)
        failed |= bool(problems)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
