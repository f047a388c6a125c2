"""CLI conventions: usage errors are one line and exit code 2 (never a traceback), --version,
the documented exit codes, ingest's paths and URLs, --json on every command that reports,
and ``log tail --follow``."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

import citewise
import citewise.web
from citewise.cli import app, exits
from citewise.cli import log as log_cli
from citewise.engine import IngestReport
from citewise.stores.base import LogEntry
from tests.helpers import ROOT, SAMPLE

runner = CliRunner()
COVERED = "varenicline dose schedule days 1 to 3 once daily"
OUT_OF_SCOPE = "quantum chromodynamics lattice gauge"


def cli(db: Path, *args: str) -> object:
    return runner.invoke(app, ["--db", str(db), *args], catch_exceptions=True)


def run(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("CITEWISE_DB", None)
    return subprocess.run([sys.executable, "-m", "citewise", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, check=False, timeout=120)


@pytest.fixture(name="sample_db")
def sample_db_fixture(tmp_path: Path) -> Path:
    db = tmp_path / "kb.db"
    r = cli(db, "ingest", "--kb", "s", "--embedder", "hashing:256", "-q", str(SAMPLE))
    assert r.exit_code == 0, r.output
    return db


@pytest.mark.parametrize(("args", "code", "stderr"), [
    (("--version",), 0, ""),
    (("ask",), 2, "Error: Missing argument 'question'. Try 'citewise ask --help'."),
    (("ask", "--kb", "x", "hi", "--bogus"), 2, "Error: No such option: --bogus. Try 'citewise ask --help'."),
    (("--bogus",), 2, "Error: No such option: --bogus. Try 'citewise --help'."),
    (("ingest", "--kb", "x", "/nonexistent"), 2,
     "Error: Invalid value for 'PATHS...': /nonexistent does not exist; nothing was ingested. "
     "Try 'citewise ingest --help'."),
])
@pytest.mark.heavy
def test_a_real_run_exits_with_one_line_and_no_traceback(tmp_path: Path, args: tuple[str, ...],
                                                         code: int, stderr: str) -> None:
    proc = run(tmp_path, *args)
    assert proc.returncode == code, proc.stderr
    assert "Traceback" not in proc.stderr + proc.stdout
    assert proc.stderr.strip() == stderr
    if args == ("--version",):
        assert proc.stdout == f"citewise {citewise.__version__}\n"
    assert not list(tmp_path.iterdir())  # no store was created


def test_usage_errors_in_process_are_one_line_exit_2(tmp_path: Path) -> None:
    for args in (["ask"], ["kb", "show"], ["kb", "set"], ["search", "-k", "0", "--kb", "s", "q"],
                 ["log", "tail", "--kb", "s", "--interval", "0"], ["nosuchcommand"]):
        r = runner.invoke(app, args)
        assert r.exit_code == exits.USAGE, (args, r.output)
        assert len(r.stderr.strip().splitlines()) == 1 and r.stderr.startswith("Error: "), args
        assert "Traceback" not in r.output


@pytest.mark.parametrize("command", ["ask", "search"])
def test_an_empty_or_oversized_question_is_a_usage_error(tmp_path: Path, command: str) -> None:
    db = str(tmp_path / "none.db")  # refused before the store is opened
    for question, said in (("  ", "The question is empty"), ("x" * 5000, "characters")):
        r = runner.invoke(app, ["--db", db, command, "--kb", "s", question])
        assert r.exit_code == exits.USAGE == 2, r.output
        assert said in r.output and "Traceback" not in r.output
    assert not (tmp_path / "none.db").exists()


def every_command() -> list[list[str]]:
    import typer.main

    def walk(command, path: list[str]) -> list[list[str]]:
        found = [path]
        for name, sub in getattr(command, "commands", {}).items():
            found += walk(sub, [*path, name])
        return found

    return walk(typer.main.get_command(app), [])


def test_help_is_in_words_and_keeps_its_brackets() -> None:
    """No Python types (``<bool>``, ``<list[str]>``) and no " ." left where rich markup ate a
    ``[default: ...]``, in the help of every command."""
    commands = every_command()
    assert ["ask"] in commands and ["kb", "set"] in commands and len(commands) > 20
    for path in commands:
        shown = runner.invoke(app, [*path, "--help"], terminal_width=200).output
        assert "<bool>" not in shown and "<str>" not in shown and "<list[" not in shown, path
        assert not re.search(r"[\w)] \.(\s|$)", shown) and "\\[" not in shown, (path, shown)
    ask = runner.invoke(app, ["ask", "--help"]).output
    assert re.search(r"--kb +TEXT ", ask) and re.search(r"--stream +Print", ask)  # a flag: no kind
    assert "[default:" in ask and "the knowledge base's]." in ask


def test_every_command_opens_with_one_line_and_ends_with_examples_that_use_its_options() -> None:
    import shlex

    import typer.main

    from citewise.cli.helptext import EXAMPLES, paragraphs

    root = typer.main.get_command(app)
    for path in every_command():
        key = " ".join(path)
        assert 2 <= len(EXAMPLES.get(key, ())) <= 3, key
        shown = runner.invoke(app, [*path, "--help"]).output
        assert "Examples:" in shown and EXAMPLES[key][0].split()[1] in shown, key
        command = root
        for name in path:
            command = command.commands[name]
        first = paragraphs(command.help or "").split("\n\n")[0]
        assert 0 < len(first) <= 100, (key, first)  # the help opens with one line
        if getattr(command, "commands", None):  # a group: its examples use its commands
            continue
        known = {o for p in [*command.params, *root.params] for o in p.opts + p.secondary_opts}
        for example in EXAMPLES[key]:
            words = shlex.split(example.replace("CITEWISE_ADMIN_KEY=... ", ""))
            assert words[0] == "citewise" and " ".join(path) in " ".join(words), example
            assert {w for w in words if w.startswith("-")} <= known, (example, known)


def test_version_and_exit_codes_are_documented() -> None:
    r = runner.invoke(app, ["--version"])
    assert r.exit_code == 0 and r.output == f"citewise {citewise.__version__}\n"
    shown = " ".join(runner.invoke(app, ["--help"], terminal_width=200).output.split())
    assert "Exit codes: 0 done" in shown and "3 refused (ask --fail-on-refusal)" in shown
    readme = (ROOT / "README.md").read_text()
    assert "## Exit codes" in readme and "`--fail-on-refusal`" in readme


@pytest.mark.heavy
def test_fail_on_refusal_gives_a_distinct_exit_code(sample_db: Path) -> None:
    assert cli(sample_db, "ask", "--kb", "s", COVERED, "--fail-on-refusal").exit_code == exits.OK
    refused = cli(sample_db, "ask", "--kb", "s", OUT_OF_SCOPE, "--fail-on-refusal")
    assert refused.exit_code == exits.REFUSED == 3 and "does not cover your question" in refused.output
    as_json = cli(sample_db, "ask", "--kb", "s", OUT_OF_SCOPE, "--fail-on-refusal", "--json")
    assert as_json.exit_code == 3 and json.loads(as_json.stdout)["status"] == "refused"
    assert cli(sample_db, "ask", "--kb", "s", OUT_OF_SCOPE).exit_code == 0  # without the flag


def test_a_missing_path_creates_nothing_even_beside_real_ones(tmp_path: Path) -> None:
    db = tmp_path / "kb.db"
    r = cli(db, "ingest", "--kb", "s", "--embedder", "hashing:64", str(SAMPLE), str(tmp_path / "no"))
    assert r.exit_code == 2 and "does not exist; nothing was ingested" in r.stderr
    assert not db.exists()


def test_a_url_is_kept_and_goes_to_ingest_url(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The URL reaches ``citewise.web.ingest_url`` as given (not mangled into http:/host/...);
    fetching it is tests/test_web_ingest.py's part."""
    db = tmp_path / "kb.db"
    seen: list[list[str]] = []

    def fake(eng: object, kb: object, urls: list[str], options: object = None,
             progress: object = None) -> IngestReport:
        seen.append(urls)
        return IngestReport(added=list(urls), chunks=3)

    monkeypatch.setattr(citewise.web, "ingest_url", fake)
    r = cli(db, "ingest", "--kb", "w", "--embedder", "hashing:64", "HTTPS://Example.org/a?b=1",
            str(SAMPLE / "bupropion.md"), "--json")
    assert r.exit_code == 0, r.output
    assert seen == [["HTTPS://Example.org/a?b=1"]]
    out = json.loads(r.stdout)
    assert out["added"] == ["HTTPS://Example.org/a?b=1", "bupropion.md"] and out["chunks"] > 3


def test_ingest_json_is_one_documented_object(tmp_path: Path) -> None:
    db = tmp_path / "kb.db"
    r = cli(db, "ingest", "--kb", "s", "--embedder", "hashing:64", str(SAMPLE), "--json")
    out = json.loads(r.stdout)
    assert set(out) == {"kb", "created", "added", "replaced", "unchanged", "skipped", "chunks",
                        "seconds", "embed_path"}
    assert out["embed_path"] is None  # the hashing embedder has one way to run
    assert out["created"] is True and len(out["added"]) == 10 and out["chunks"] > 10
    again = json.loads(cli(db, "ingest", "--kb", "s", str(SAMPLE), "--json").stdout)
    assert again["created"] is False and len(again["unchanged"]) == 10 and again["chunks"] == 0


def test_every_command_that_reports_takes_json(sample_db: Path, tmp_path: Path) -> None:
    r = cli(sample_db, "log", "feedback", "1", "--kb", "s", "--helpful", "--json")
    assert r.exit_code == 1  # no question logged yet: an error, not JSON
    assert cli(sample_db, "ask", "--kb", "s", COVERED).exit_code == 0
    assert json.loads(cli(sample_db, "log", "feedback", "1", "--kb", "s", "--helpful",
                          "--json").stdout) == {"kb": "s", "query_id": 1, "helpful": True, "note": ""}
    out = json.loads(cli(sample_db, "log", "export", str(tmp_path / "l.jsonl"), "--kb", "s",
                         "--json").stdout)
    assert out["entries"] == 1 and out["format"] == "jsonl"
    tail = [json.loads(line) for line in cli(sample_db, "log", "tail", "--kb", "s", "--json")
            .stdout.splitlines()]
    assert [(t["id"], t["question"], t["feedback"]) for t in tail] == [(1, COVERED, True)]
    assert json.loads(cli(sample_db, "kb", "backfill", "s", "--json").stdout) == {
        "kb": "s", "chunks_filled": 0}
    tenant = json.loads(cli(sample_db, "tenant", "create", "acme", "--json").stdout)
    assert tenant["name"] == "acme"
    key = json.loads(cli(sample_db, "tenant", "key", "acme", "--json").stdout)
    assert json.loads(cli(sample_db, "tenant", "revoke", "acme", str(key["id"]), "--json")
                      .stdout) == {"tenant": "acme", "key_id": key["id"], "revoked": True}
    deleted = cli(sample_db, "kb", "delete", "s", "--yes", "--json")
    assert json.loads(deleted.stdout)["deleted"] is True
    assert json.loads(deleted.stdout)["documents"] == 10
    assert json.loads(cli(sample_db, "kb", "list", "--json").stdout) == []


@pytest.mark.heavy
def test_kb_delete_asks_on_stderr_so_json_stays_clean(sample_db: Path) -> None:
    args = ("--db", str(sample_db), "kb", "delete", "s", "--json")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    no = subprocess.run([sys.executable, "-m", "citewise", *args], input="n\n", env=env,
                        capture_output=True, text=True, check=False, timeout=120)
    assert no.returncode == 1 and no.stdout.strip() == "" and "Delete knowledge base 's'" in no.stderr
    yes = subprocess.run([sys.executable, "-m", "citewise", *args], input="y\n", env=env,
                         capture_output=True, text=True, check=False, timeout=120)
    assert yes.returncode == 0 and json.loads(yes.stdout)["kb"] == "s"


def _entry(i: int, at: str) -> LogEntry:
    return LogEntry(i, at, f"q{i}", "answered", "answered", "hashing:64", {})


def test_follow_shows_each_new_entry_once_across_same_second_polls(
        monkeypatch: pytest.MonkeyPatch) -> None:
    log = [_entry(1, "T1")]
    polls = [[_entry(2, "T1")], [_entry(3, "T2")], [_entry(4, "T2")], []]

    def sleep(seconds: float) -> None:
        if not polls:
            raise KeyboardInterrupt
        log.extend(polls.pop(0))

    monkeypatch.setattr(log_cli.time, "sleep", sleep)
    emitted: list[int] = []
    log_cli.follow(lambda since: [e for e in log if since is None or e.created_at >= since],
                   log[:1], lambda e: emitted.append(e.id), 0.1)
    assert emitted == [2, 3, 4]  # returns on Ctrl-C, every entry once


def test_log_tail_follow_prints_new_questions_and_stops_on_ctrl_c(
        sample_db: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    asked = iter(["nicotine patch dose", "bupropion seizures"])

    def sleep(seconds: float) -> None:
        question = next(asked, None)
        if question is None:
            raise KeyboardInterrupt
        assert cli(sample_db, "ask", "--kb", "s", question).exit_code == 0

    assert cli(sample_db, "ask", "--kb", "s", COVERED).exit_code == 0
    monkeypatch.setattr(log_cli.time, "sleep", sleep)
    r = cli(sample_db, "log", "tail", "--kb", "s", "--follow", "--interval", "0.05")
    assert r.exit_code == 0, r.output
    lines = r.stdout.splitlines()
    assert [line.split("\t")[0] for line in lines] == ["#1", "#2", "#3"]
    assert lines[2].endswith("bupropion seizures")


@pytest.mark.heavy
def test_a_real_log_tail_follow_ends_cleanly_on_sigint(sample_db: Path) -> None:
    assert cli(sample_db, "ask", "--kb", "s", COVERED).exit_code == 0
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    # run from a shell's background job (nohup, `make test &`) this process ignores SIGINT, and
    # an ignored signal stays ignored in a child: with a handler here, the child's is the default
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        proc = subprocess.Popen(
            [sys.executable, "-m", "citewise", "--db", str(sample_db), "log", "tail", "--kb", "s",
             "--follow", "--interval", "0.1", "--json"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    finally:
        signal.signal(signal.SIGINT, previous)
    try:
        assert json.loads(proc.stdout.readline())["id"] == 1  # type: ignore[union-attr]
        assert cli(sample_db, "ask", "--kb", "s", OUT_OF_SCOPE).exit_code == 0
        new = json.loads(proc.stdout.readline())  # type: ignore[union-attr]
        assert (new["id"], new["status"]) == (2, "refused")
        time.sleep(0.3)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
    finally:
        proc.kill()
        proc.communicate()  # its pipes closed here, not by a later test's garbage collection
    assert proc.returncode == 0 and "Traceback" not in err and out == ""
