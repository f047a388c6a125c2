"""The engine and the CLI end to end on the sample collection, with the hashing embedder."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from citewise.cli import app
from citewise.cli.common import one_of
from citewise.engine import Engine
from citewise.errors import ConfigError, QueryError, UnknownNameError
from citewise.ingest.chunking import CHUNKERS, DEFAULT_CHUNKER
from citewise.ingest.documents import walk
from citewise.records import Answer, Document, Refusal
from citewise.search.retrieval import MODES
from tests.helpers import SAMPLE

runner = CliRunner()


def cli(db: Path, *args: str) -> object:
    return runner.invoke(app, ["--db", str(db), *args], catch_exceptions=True)


def test_ingest_reingest_and_changed_file(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    shutil.copytree(SAMPLE, docs)
    db = tmp_path / "kb.db"
    r = cli(db, "ingest", "--kb", "s", "--embedder", "hashing:256", "-q", str(docs))
    assert r.exit_code == 0, r.output
    assert "10 added, 0 replaced, 0 unchanged, 0 skipped" in r.output
    r = cli(db, "ingest", "--kb", "s", "-q", str(docs))
    assert "0 added, 0 replaced, 10 unchanged" in r.output and "0 chunks written" in r.output
    path = docs / "bupropion.md"
    path.write_text(path.read_text() + "\n\n## New section\n\nA new paragraph about bupropion.\n")
    r = cli(db, "ingest", "--kb", "s", "-q", str(docs))
    assert "0 added, 1 replaced, 9 unchanged" in r.output
    r = cli(db, "search", "--kb", "s", "new paragraph bupropion", "--json", "--mode", "bm25")
    assert json.loads(r.output)["chunks"][0]["section"] == "New section"
    assert json.loads(r.output)["order"] == "score"  # bm25 alone: no MMR
    # the hybrid default picks by MMR, and says so, since its scores need not fall
    shown = cli(db, "search", "--kb", "s", "bupropion dose", "-k", "3").output.splitlines()
    assert shown[0].startswith("3 chunks, hybrid retrieval, in the order") and "(MMR)" in shown[0]
    scores = [float(line.split("bm25")[0].split()[-1]) for line in shown[1:] if " cos " in line]
    assert len(scores) == 3
    assert cli(db, "search", "--kb", "s", "bupropion dose", "--mode", "dense").output.startswith(
        "8 chunks, dense retrieval, best score first:")


def test_bad_files_are_skipped_and_nothing_stored_is_touched(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "good.md").write_text("# Good\n\n## Part\n\nNicotine gum helps cravings.")
    db = tmp_path / "kb.db"
    assert cli(db, "ingest", "--kb", "s", "--embedder", "hashing:64", "-q", str(docs)).exit_code == 0
    (docs / "empty.txt").write_text("")
    (docs / "bin.md").write_bytes(b"\x00\x00\x00")
    (docs / "x.xlsx").write_bytes(b"PK")
    r = cli(db, "ingest", "--kb", "s", "-q", str(docs))
    assert r.exit_code == 0
    assert "skipped" in r.output and "3 skipped" in r.output and "1 unchanged" in r.output
    shown = json.loads(cli(db, "kb", "show", "s", "--json").output)
    assert [d["doc_id"] for d in shown["documents"]] == ["good.md"]


def test_two_knowledge_bases_in_one_file_never_see_each_other(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    (a / "same.md").write_text("# A\n\n## Secret\n\nThe alpha launch code is zebra.")
    (b / "same.md").write_text("# B\n\n## Notes\n\nBeta notes about shipping.")
    db = tmp_path / "kb.db"
    cli(db, "ingest", "--kb", "a", "--embedder", "hashing:64", "-q", str(a))
    cli(db, "ingest", "--kb", "b", "--embedder", "hashing:64", "-q", str(b))
    for mode in ("dense", "bm25", "hybrid"):
        out = cli(db, "search", "--kb", "b", "alpha launch code zebra", "--json", "--mode", mode).output
        texts = json.dumps(json.loads(out)["chunks"])
        assert "zebra" not in texts and "Secret" not in texts
        assert ("Beta notes" in texts) == (mode != "bm25")
    out = json.loads(cli(db, "ask", "--kb", "b", "What is the alpha launch code?", "--json").output)
    out.pop("question")
    assert "zebra" not in json.dumps(out) and "Secret" not in json.dumps(out)
    listing = cli(db, "kb", "list", "--json").output
    assert [k["name"] for k in json.loads(listing)] == ["a", "b"]


def test_ask_json_shape_answer_and_refusal(engine: Engine) -> None:
    kb = engine.open_kb("s", embedder="hashing:256")
    engine.ingest(kb, [SAMPLE])
    answer = engine.ask(kb, "varenicline dose schedule days 1 to 3 once daily")
    assert isinstance(answer, Answer)
    assert answer.citations and all(c.quote and c.doc_id.endswith(".md") for c in answer.citations)
    refusal = engine.ask(kb, "quantum chromodynamics lattice gauge")
    assert isinstance(refusal, Refusal) and refusal.path == "gate"
    assert len(refusal.chunks) == 5 and refusal.related
    assert refusal.reason.startswith("This collection does not cover your question")
    assert "The closest topics it does cover are: " + "; ".join(refusal.related) in refusal.reason
    logged = engine.store.db.conn.execute("SELECT status FROM query_log ORDER BY id").fetchall()
    assert logged == [("answered",), ("refused",)]


def test_cli_ask_json_is_the_documented_object(tmp_path: Path) -> None:
    db = tmp_path / "kb.db"
    cli(db, "ingest", "--kb", "s", "--embedder", "hashing:256", "-q", str(SAMPLE))
    data = json.loads(cli(db, "ask", "--kb", "s", "varenicline dose schedule days 1 to 3 once daily",
                          "--json").output)
    assert {"status", "answer", "citations", "reason", "related", "chunks", "gate"} <= set(data)
    assert data["status"] == "answered" and data["citations"]  # so the loop below reads some
    assert set(data["gate"]) == {"policy", "signal", "threshold", "parts"}
    assert data["gate"]["parts"] == [] and data["uncovered"] == []
    assert data["standalone_question"] == data["question"]
    for c in data["chunks"]:
        assert set(c) == {"doc_id", "section", "chunk_id", "cosine", "bm25", "rrf", "fused", "text"}
        assert c["fused"] == c["rrf"]  # "rrf" is the fused score's first name, kept as an alias
    assert any(c["fused"] > 0 for c in data["chunks"])
    for c in data["citations"]:
        assert set(c) == {"n", "doc_id", "title", "section", "chunk_id", "quote"}
    assert data["citations"][0]["doc_id"] == "varenicline.md"
    assert data["citations"][0]["title"] == "Varenicline"  # its first heading, not the file name


def test_the_cli_lists_chunkers_and_modes_from_the_registries(tmp_path: Path) -> None:
    assert one_of(CHUNKERS, DEFAULT_CHUNKER) in " ".join(runner.invoke(app, ["ingest", "--help"])
                                                         .output.replace("│", " ").split())
    for command in ("search", "eval"):
        shown = " ".join(runner.invoke(app, [command, "--help"]).output.replace("│", " ").split())
        assert one_of(MODES) in shown, command
    r = cli(tmp_path / "kb.db", "search", "--kb", "s", "x", "--mode", "hybrid-mmr")
    assert r.exit_code == 1 and isinstance(r.exception, UnknownNameError)
    assert str(r.exception).endswith(f"names: {', '.join(sorted(MODES))}.")
    assert not (tmp_path / "kb.db").exists()  # refused before the store is opened


def test_ingest_takes_paths_or_documents_but_not_both(engine: Engine) -> None:
    kb = engine.open_kb("s", embedder="hashing:64")
    docs = [d for d in walk([SAMPLE]) if isinstance(d, Document)]
    with pytest.raises(TypeError, match="not a mix"):
        engine.ingest(kb, [SAMPLE, docs[0]])
    assert engine.store.list_documents(kb) == []
    assert len(engine.ingest(kb, docs).added) == len(docs) == 10
    assert len(engine.ingest(kb, [SAMPLE]).unchanged) == 10


def test_questions_and_names_are_checked(engine: Engine) -> None:
    kb = engine.open_kb("s", embedder="hashing:64")
    with pytest.raises(QueryError, match="empty"):
        engine.ask(kb, "   ")
    with pytest.raises(QueryError, match="limit is 2,000"):
        engine.ask(kb, "why " * 3000)
    with pytest.raises(ConfigError, match="Invalid knowledge base name"):
        engine.open_kb("../etc")
    with pytest.raises(ConfigError, match="cannot take"):
        engine.open_kb("s", embedder="hashing:32")
    assert engine.open_kb("s", chunker="window").config.chunker == "window"  # empty: allowed
    engine.ingest(engine.store.get_kb("s"), [SAMPLE])
    with pytest.raises(ConfigError, match="would not be re-chunked"):
        engine.open_kb("s", chunker="sections")


def _commands(command: object, prefix: list[str]) -> list[tuple[list[str], object]]:
    found = [(prefix, command)]
    if hasattr(command, "commands"):  # a group (typer carries its own click)
        for name, sub in command.commands.items():
            found += _commands(sub, [*prefix, name])
    return found


@pytest.mark.heavy
def test_every_command_has_help() -> None:
    """Walks the real command tree, so a new command cannot ship without help text of its own:
    the first line of its docstring (or ``help=``) is in its ``--help``."""
    import typer.main

    commands = _commands(typer.main.get_command(app), [])
    paths = [args for args, _ in commands]
    assert len(paths) > 20 and ["ask"] in paths and ["kb", "show"] in paths
    missing = [" ".join(args) or "citewise" for args, command in commands if not (command.help or "").strip()]
    assert not missing, f"commands without a docstring: {missing}"
    for args, command in commands:
        r = runner.invoke(app, [*args, "--help"], terminal_width=200)
        assert r.exit_code == 0 and "Usage" in r.output, args
        first = " ".join(command.help.strip().splitlines()[0].split())
        assert first in " ".join(r.output.split()), (args, first)


@pytest.mark.heavy
def test_errors_are_one_line_with_exit_code_1(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "citewise", "--db", str(tmp_path / "x.db"), "ask", "--kb", "nope", "hi"],
        capture_output=True, text=True, check=False,
    )
    assert proc.returncode == 1
    assert proc.stderr.strip() == (
        "Error: No knowledge base named 'nope'; create it with `citewise ingest --kb nope PATH`"
    )


def test_kb_show_never_prints_the_log_hashing_key(tmp_path: Path) -> None:
    from citewise.stores.sqlite import open_sqlite
    from citewise.telemetry.log import with_policy

    db = tmp_path / "kb.db"
    cli(db, "ingest", "--kb", "s", "--embedder", "hashing:64", "-q", str(SAMPLE))
    store = open_sqlite(db)
    kb = store.get_kb("s")
    from dataclasses import replace

    policy = with_policy(kb.config.log, hash_questions=True)
    store.update_kb("s", replace(kb.config, log=policy))
    out = cli(db, "kb", "show", "s", "--json").output
    assert policy.salt not in out and json.loads(out)["config"]["log"]["salt"] == "(set)"
