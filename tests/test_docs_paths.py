"""Every file the code's docstrings and comments, the README and ``docs/`` name exists: a path
(``stores/kb_cache.py``, ``benchmarks/README.md``) from the repository's root, the package's
or the page's, a bare module name (``gate.py``) somewhere in the tree. A file moved or
deleted leaves no word pointing at it."""

from __future__ import annotations

import re
from pathlib import Path

from tests.helpers import ROOT

NAMED = re.compile(r"(?<![\w./$-])((?:[\w-]+/)*[\w-]+\.(?:py|md|jsonl))\b")
SCANNED = ("citewise", "benchmarks", "training")


def named_files(text: str) -> list[tuple[int, str]]:
    return [(n, m.group(1)) for n, line in enumerate(text.splitlines(), 1)
            for m in NAMED.finditer(line)]


def exists(name: str, modules: set[str], here: Path) -> bool:
    if "/" not in name:
        return not name.endswith(".py") or name in modules
    bases = [base for base in (ROOT, ROOT / "citewise", here) if (base / name.split("/")[0]).is_dir()]
    return not bases or any((base / name).exists() for base in bases)  # no base: another package's


def test_every_file_named_in_the_code_exists() -> None:
    modules = {p.name for d in (*SCANNED, "tests") for p in (ROOT / d).rglob("*.py")}
    missing = [f"{path.relative_to(ROOT)}:{n}: {name}"
               for d in SCANNED for path in sorted((ROOT / d).rglob("*.py"))
               for n, name in named_files(path.read_text()) if not exists(name, modules, path.parent)]
    assert not missing, "\n".join(missing)


def test_every_file_named_in_the_docs_exists() -> None:
    modules = {p.name for d in (*SCANNED, "tests") for p in (ROOT / d).rglob("*.py")}
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")),
             ROOT / "benchmarks" / "README.md", ROOT / "citewise" / "reader" / "MODEL_CARD.md"]
    missing = [f"{path.relative_to(ROOT)}:{n}: {name}" for path in pages
               for n, name in named_files(path.read_text()) if not exists(name, modules, path.parent)]
    assert not missing, "\n".join(missing)


def test_the_check_sees_a_stale_name() -> None:
    text = ("see ``citewise/gate.py`` and ``stores/kb_cache.py``; ``nowhere.py``; ``gate.py``; "
            "prometheus_client/metrics.py")
    found = [name for _, name in named_files(text)]
    assert found == ["citewise/gate.py", "stores/kb_cache.py", "nowhere.py", "gate.py",
                     "prometheus_client/metrics.py"]
    modules = {"gate.py", "kb_cache.py"}
    assert [exists(name, modules, ROOT) for name in found] == [False, True, False, True, True]
