"""How ``ingest --ray`` cuts its input into read tasks (no Ray needed): every document once,
in the same form the single-process path reads it."""

from __future__ import annotations

import json
import pickle
from pathlib import Path

from citewise.ingest.distributed import absolute_url, plan, read_unit
from citewise.ingest.documents import walk


def test_read_units_cover_every_document_once(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus.jsonl"
    lines = [json.dumps({"_id": f"d{i}", "title": f"T{i}", "text": f"text é {i}"}) for i in range(10)]
    lines[4] = "{broken"
    lines[7] = ""
    corpus.write_text("\n".join(lines) + "\n", encoding="utf-8")
    folder = tmp_path / "docs"
    (folder / ".hidden").mkdir(parents=True)
    (folder / "a.md").write_text("# A\n\nalpha text\n")
    (folder / ".hidden" / "b.md").write_text("# B\n\nhidden\n")
    (folder / "empty.txt").write_text("")
    units, missing = plan([corpus, folder, tmp_path / "nope"])
    assert [m.reason for m in missing] == ["no such file or folder"]
    items = [pickle.loads(row["item"]) for unit in units for row in read_unit(unit)]
    assert items == list(walk([corpus, folder]))


def test_beir_shards_split_at_line_boundaries(tmp_path: Path) -> None:
    import citewise.ingest.distributed as d

    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("".join(json.dumps({"_id": str(i), "text": "x" * i}) + "\n" for i in range(1, 11)))
    shards = d.beir_shards(corpus, lines=3)
    assert [(s["first"], s["lines"]) for s in shards] == [(1, 3), (4, 3), (7, 3), (10, 1)]
    ids = [pickle.loads(r["item"]).id for s in shards for r in read_unit(s)]
    assert ids == [str(i) for i in range(1, 11)]


def test_sqlite_urls_are_made_absolute_for_workers(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert absolute_url("sqlite:///kb.db") == f"sqlite:///{tmp_path}/kb.db"
    assert absolute_url("sqlite:///kb.db?ann_min_chunks=5") == f"sqlite:///{tmp_path}/kb.db?ann_min_chunks=5"
    assert absolute_url("mysql://root@127.0.0.1/test") == "mysql://root@127.0.0.1/test"
