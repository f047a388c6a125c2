"""The package's layers: a module imports from its own layer and the layers below, never above.

The folders read as the pipeline (``ingest/``, ``search/``, ``answer/``, ``calibrate/``) beside
the parts they use (``stores/``, ``embedders/``, ``reader/``, ``generators/``, ``hosted/``) and
the surfaces that use them (``api/``, ``cli/``, ``ui/``). Imports under ``if TYPE_CHECKING:``
are for the type checker only and are not counted.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "citewise"

# lowest first; a name is a module or a package (the longest name that matches wins)
LAYERS: list[tuple[str, tuple[str, ...]]] = [
    ("shared", ("citewise.errors", "citewise.records", "citewise.bounded", "citewise.storable",
                "citewise.sentences", "citewise.kb", "citewise.output", "citewise.tenancy",
                "citewise.registry")),
    ("stores", ("citewise.stores", "citewise.ratelimit")),
    ("models", ("citewise.hosted", "citewise.embedders", "citewise.reader")),
    ("ingest", ("citewise.ingest",)),
    ("search", ("citewise.search",)),
    ("answer", ("citewise.answer", "citewise.generators")),
    ("engine", ("citewise.engine", "citewise.kb_settings", "citewise.config", "citewise.telemetry")),
    # above the engine: what drives it (calibration, replay, the crawler, Ray's ingest workers)
    ("tools", ("citewise.calibrate", "citewise.telemetry.replay", "citewise.web",
               "citewise.ingest.distributed", "citewise.testing")),
    ("surfaces", ("citewise.api", "citewise.cli", "citewise.ui", "citewise.server",
                  "citewise.__main__", "citewise")),
]
RANK = {name: rank for rank, (_, names) in enumerate(LAYERS) for name in names}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def layer(module: str) -> int:
    name = module
    while name not in RANK:
        name, dot, _ = name.rpartition(".")
        assert dot, f"{module} is in no layer: add it to LAYERS"
    return RANK[name]


def is_module(dotted: str) -> bool:
    path = PACKAGE.parent.joinpath(*dotted.split("."))
    return path.with_suffix(".py").exists() or (path / "__init__.py").exists()


def imports(source: str, module: str, package: bool = False) -> set[str]:
    """The citewise modules a module's source imports, outside ``if TYPE_CHECKING:`` blocks
    (``package``: the source is the package's ``__init__``)."""
    tree = ast.parse(source)
    package_name = module if package else module.rpartition(".")[0]
    skipped = {id(n) for node in ast.walk(tree) if isinstance(node, ast.If)
               and ast.unparse(node.test).endswith("TYPE_CHECKING") for n in ast.walk(node)}
    found = set()
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.startswith("citewise")}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package_name.split(".")
                up = parts[: len(parts) - node.level + 1]
                base = ".".join([*up, base] if base else up)
            if base.startswith("citewise"):  # a submodule named in the import counts as itself
                found |= {f"{base}.{a.name}" if is_module(f"{base}.{a.name}") else base
                          for a in node.names}
    return found


def test_every_import_points_down_or_across() -> None:
    upward = []
    for path in sorted(PACKAGE.rglob("*.py")):
        module = module_name(path)
        for target in imports(path.read_text(), module, path.name == "__init__.py"):
            if layer(target) > layer(module):
                upward.append(f"{module} ({LAYERS[layer(module)][0]}) imports {target} "
                              f"({LAYERS[layer(target)][0]})")
    assert not upward, "\n".join(upward)


def test_the_root_keeps_only_what_every_stage_shares() -> None:
    root = sorted(p.stem for p in PACKAGE.glob("*.py"))
    assert root == ["__init__", "__main__", "bounded", "config", "engine", "errors", "kb",
                    "kb_settings", "output", "ratelimit", "records", "registry", "sentences",
                    "server", "storable", "tenancy"]


def test_the_check_sees_an_upward_import_and_not_one_for_the_type_checker() -> None:
    source = ("from typing import TYPE_CHECKING\nfrom ..answer import gate\nimport citewise.kb\n"
              "if TYPE_CHECKING:\n    from citewise.engine import Engine\n"
              "def later():\n    from citewise.api import app\n")
    found = imports(source, "citewise.stores.x")
    assert found == {"citewise.answer.gate", "citewise.kb", "citewise.api.app"}
    assert layer("citewise.answer.gate") > layer("citewise.stores.x") > layer("citewise.kb")
    assert layer("citewise.telemetry.replay") > layer("citewise.telemetry.log")


def answering_methods() -> set[str]:
    from citewise.stores.roles import Answering

    return {n for n, v in vars(Answering).items() if callable(v) and not n.startswith("_")}


def store_calls(function: ast.AST, name: str) -> set[str]:
    """The methods called on ``name`` (``store.x(...)``, or ``self.store.x(...)``) in a function."""
    out = set()
    for node in ast.walk(function):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            owner = ast.unparse(node.func.value)
            if owner == name:
                out.add(node.func.attr)
    return out


def test_the_answer_path_reads_the_store_through_its_narrow_protocol() -> None:
    """Every function of ``search/`` and ``answer/`` handed the store takes an ``Answering``
    and calls nothing else of it; so do the engine's question methods."""
    allowed, seen = answering_methods(), set()
    assert len(allowed) <= 10, sorted(allowed)
    for path in [*sorted((PACKAGE / "search").glob("*.py")), *sorted((PACKAGE / "answer").glob("*.py"))]:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef):
                arg = next((a for a in node.args.args if a.arg == "store"), None)
                if arg is not None and ast.unparse(arg.annotation) == "Answering":
                    seen |= store_calls(node, "store")
    engine = ast.parse((PACKAGE / "engine.py").read_text())
    for node in ast.walk(engine):
        if isinstance(node, ast.FunctionDef) and node.name in ("retrieve", "decide"):
            seen |= store_calls(node, "self.store")
    assert seen and seen <= allowed, sorted(seen - allowed)
