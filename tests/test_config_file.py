"""citewise.toml: where it is read from, the order against env vars and flags, the [kb]
defaults at creation, the [server] settings, and one clear error per bad file."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from citewise.api.settings import Settings, get_settings
from citewise.cli import app
from citewise.config import FileConfig, config_paths, load_config, user_config_dir
from citewise.errors import ConfigError
from tests.helpers import ROOT, SAMPLE

runner = CliRunner()


@pytest.fixture(name="dirs")
def dirs_fixture(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Path, Path]]:
    """(project folder, user config folder), the first the current folder."""
    project, xdg = tmp_path / "project", tmp_path / "xdg"
    project.mkdir()
    (xdg / "citewise").mkdir(parents=True)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(xdg))
    monkeypatch.delenv("CITEWISE_DB", raising=False)
    monkeypatch.chdir(project)
    get_settings.cache_clear()
    yield project, xdg / "citewise"
    get_settings.cache_clear()  # no other test gets these settings


def test_no_file_is_an_empty_config(dirs: tuple[Path, Path]) -> None:
    assert load_config() == FileConfig()


def test_the_user_folder_follows_xdg_else_home(monkeypatch: pytest.MonkeyPatch) -> None:
    assert user_config_dir({"XDG_CONFIG_HOME": "/x/conf"}) == Path("/x/conf/citewise")
    for env in ({}, {"XDG_CONFIG_HOME": "relative"}):  # a relative XDG path is ignored
        assert user_config_dir(env) == Path.home() / ".config" / "citewise"


def test_project_values_win_over_the_user_file_key_by_key(dirs: tuple[Path, Path]) -> None:
    project, user = dirs
    (user / "citewise.toml").write_text('[store]\nurl = "user.db"\n[kb]\ncontext_k = 4\nfusion = "rrf"\n')
    (project / "citewise.toml").write_text('[kb]\ncontext_k = 6\n')
    config = load_config()
    assert config_paths() == [user / "citewise.toml", project / "citewise.toml"]
    assert config.store_url == "user.db" and dict(config.kb) == {"context_k": 6, "fusion": "rrf"}
    assert config.where("kb", "context_k") == f"{project / 'citewise.toml'}: [kb] context_k"
    assert config.where("kb", "fusion") == f"{user / 'citewise.toml'}: [kb] fusion"


def test_store_url_order_flag_then_env_then_file(dirs: tuple[Path, Path]) -> None:
    project, _ = dirs
    (project / "citewise.toml").write_text('[store]\nurl = "from-file.db"\n')

    def made(*args: str, env: dict[str, str] | None = None) -> set[str]:
        r = runner.invoke(app, [*args, "kb", "list"], env=env)
        assert r.exit_code == 0, r.output
        return {p.name for p in project.glob("*.db")}

    assert made() == {"from-file.db"}
    assert made(env={"CITEWISE_DB": "from-env.db"}) == {"from-file.db", "from-env.db"}
    assert made("--db", "from-flag.db", env={"CITEWISE_DB": "from-env.db"}) == {
        "from-file.db", "from-env.db", "from-flag.db"}


def test_kb_defaults_apply_to_a_knowledge_base_the_cli_creates(dirs: tuple[Path, Path]) -> None:
    project, _ = dirs
    (project / "citewise.toml").write_text(
        '[kb]\nembedder = "hashing:64"\nchunker = "window"\ngenerator = "scripted:hello"\n'
        'context_k = 5\nfusion = "rrf"\ngate_policy = "mean"\nmmr = false\n')
    r = runner.invoke(app, ["ingest", "--kb", "s", "-q", str(SAMPLE)])
    assert r.exit_code == 0, r.output
    shown = json.loads(runner.invoke(app, ["kb", "show", "s", "--json"]).stdout)
    c = shown["config"]
    assert (c["embedder"], c["chunker"], c["generator"]) == ("hashing:64", "window", "scripted:hello")
    assert (c["retrieval"]["context_k"], c["retrieval"]["fusion"], c["retrieval"]["mmr"]) == (5, "rrf", False)
    assert shown["gate_in_use"]["policy"] == "mean"
    # flags win over the file; an existing knowledge base keeps what it has
    r = runner.invoke(app, ["ingest", "--kb", "t", "--embedder", "hashing:32", "--chunker",
                            "sections", "-q", str(SAMPLE / "bupropion.md")])
    t = json.loads(runner.invoke(app, ["kb", "show", "t", "--json"]).stdout)["config"]
    assert (t["embedder"], t["chunker"], t["retrieval"]["context_k"]) == ("hashing:32", "sections", 5)
    (project / "citewise.toml").write_text('[kb]\ncontext_k = 9\n')
    runner.invoke(app, ["ingest", "--kb", "s", "-q", str(SAMPLE)])
    again = json.loads(runner.invoke(app, ["kb", "show", "s", "--json"]).stdout)["config"]
    assert again["retrieval"]["context_k"] == 5


@pytest.mark.parametrize(("text", "message"), [
    ('[kb]\nfusion = "wavelet"\n', "[kb] fusion: Unknown fusion 'wavelet'. Valid fusion names: convex, rrf."),
    ('[kb]\ncontext_k = 0\n', "[kb] context_k: retrieval setting context_k must be at least 1"),
    ('[kb]\ncontext_k = true\n', "[kb] context_k: context_k takes an integer, not True"),
    ('[kb]\ngenerator = "openai"\n', "[kb] generator: the openai generator needs a model: openai:MODEL"),
    ('[kb]\ngate_policy = "loudest"\n', "[kb] gate_policy: Unknown gate policy 'loudest'."),
    ('[kb]\nembedder = "mystery:1"\n', "[kb] embedder: an embedder spec, one of"),
    ('[kb]\nchunker = "words"\n', "[kb] chunker: one of sections, window, not 'words'"),
    ('[kb]\ncolour = "red"\n', "[kb] colour: unknown key; valid keys: embedder, chunker, generator"),
    ('[kb]\nkeyword_rare_share = 0.5\nkeyword_drop_share = 0.4\n', "[kb]: retrieval settings must"),
    ('[store]\nurl = 3\n', "[store] url: a store URL or SQLite path, as a string"),
    ('[store]\npath = "x.db"\n', "[store] path: unknown key; valid keys: url"),
    ('[server]\nadmin_key = "s3cret-s3cret-s3cret"\n', "[server] admin_key: not read from a file: "
     "it is a secret: set the environment variable CITEWISE_ADMIN_KEY"),
    ('[server]\nredis_url = "redis://:s3cret@localhost:6379/0"\n', "[server] redis_url: not read "
     "from a file with its password: it is a secret: set the environment variable CITEWISE_REDIS_URL"),
    ('[servre]\nport = 1\n', "unknown section [servre]; valid sections: [store], [kb], [server]"),
    ('url = "x.db"\n', "url: a key outside any section; put it under [store], [kb], [server]"),
    ('[kb\n', "not valid TOML: Expected ']' at the end of a table declaration (at line 1, column 4)"),
])
def test_a_bad_file_is_one_error_naming_the_file_and_key(dirs: tuple[Path, Path], text: str,
                                                         message: str) -> None:
    project, _ = dirs
    path = project / "citewise.toml"
    path.write_text(text)
    with pytest.raises(ConfigError) as e:
        load_config()
    assert str(e.value).startswith(f"{path}: ") and message in str(e.value)
    r = runner.invoke(app, ["kb", "list"])
    assert r.exit_code == 1 and isinstance(r.exception, ConfigError)
    assert not list(project.glob("*.db"))


def test_server_settings_come_from_the_file_below_env_vars(dirs: tuple[Path, Path],
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    project, user = dirs
    (user / "citewise.toml").write_text('[server]\nrate_per_minute = 30\n')
    (project / "citewise.toml").write_text(
        '[store]\nurl = "served.db"\n[server]\ncompute_slots = 3\n'
        'generators = ["extractive", "openai:gpt-4o-mini"]\nmax_files = 7\n')
    monkeypatch.setenv("CITEWISE_MAX_FILES", "9")
    s = get_settings()
    assert (s.db, s.compute_slots, s.max_files, s.rate_per_minute) == ("served.db", 3, 9, 30)
    assert s.allowed_generators == ["extractive", "openai:gpt-4o-mini"]
    assert Settings(compute_slots=5).compute_slots == 5  # arguments above everything


def test_worker_processes_share_the_cores_as_compute_slots(dirs: tuple[Path, Path],
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("os.cpu_count", lambda: 8)
    assert (Settings().slots, Settings().per_tenant_slots) == (8, 4)
    monkeypatch.setenv("CITEWISE_WORKERS", "3")  # as `citewise serve --workers 3` sets it
    assert (Settings().slots, Settings().per_tenant_slots) == (2, 1)
    assert Settings(workers=16).slots == 1
    assert Settings(compute_slots=6).slots == 6  # an operator's number wins


@pytest.mark.parametrize(("text", "env", "message"), [
    ('[server]\ncompute_slots = 0\n', {}, "citewise.toml: [server] compute_slots: Input should be "
     "greater than or equal to 1"),
    ('[server]\ncompute_slot = 2\n', {}, "citewise.toml: [server] compute_slot: unknown key; "
     "valid keys: embedder, embedders, generators"),
    ('[server]\ncompute_slots = 2\n', {"CITEWISE_COMPUTE_SLOTS": "many"},
     "CITEWISE_COMPUTE_SLOTS: Input should be a valid integer"),
])
def test_a_bad_server_value_names_where_it_came_from(dirs: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch,
                                                     text: str, env: dict[str, str], message: str) -> None:
    project, _ = dirs
    (project / "citewise.toml").write_text(text)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    with pytest.raises(ConfigError) as e:
        get_settings()
    assert message in str(e.value)
    assert str(e.value).startswith(str(project) if not env else "CITEWISE_")


def test_the_documented_example_is_a_valid_file(dirs: tuple[Path, Path]) -> None:
    readme = (ROOT / "docs" / "settings.md").read_text()
    example = readme.split("```toml\n", 1)[1].split("```", 1)[0]
    project, _ = dirs
    (project / "citewise.toml").write_text(example)
    config = load_config()
    assert config.store_url and config.kb["context_k"] == 8 and config.kb["fusion"] == "convex"
    assert get_settings().compute_slots == 4

