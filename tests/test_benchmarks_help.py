"""Every benchmark script starts as ``python -m benchmarks.NAME``, is listed in the index, and
reaches into no private part of citewise (the scripts themselves are too long to run here)."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from tests.helpers import ROOT

BENCHMARKS = ROOT / "benchmarks"
SCRIPTS = sorted(p.stem for p in BENCHMARKS.glob("*.py") if 'if __name__ == "__main__":' in p.read_text())
# another object's attribute with a leading underscore (its own ``self._x`` is fine), or a
# store built by __new__
PRIVATE = re.compile(r"\b(?!self\b)[A-Za-z_]\w*\._[a-z]\w*|__new__")


@pytest.mark.heavy
def test_every_script_prints_its_usage_when_run_as_a_module() -> None:
    assert len(SCRIPTS) >= 14 and "stores" in SCRIPTS and "scifact" in SCRIPTS
    runs = {name: subprocess.Popen([sys.executable, "-m", f"benchmarks.{name}", "--help"], cwd=ROOT,
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            for name in SCRIPTS}
    failed = {}
    for name, proc in runs.items():
        out, err = proc.communicate(timeout=120)
        if proc.returncode != 0 or "usage:" not in out:
            failed[name] = (err or out)[-300:]
    assert not failed, failed


def test_scripts_edit_no_sys_path_and_touch_nothing_private() -> None:
    for path in sorted(BENCHMARKS.glob("*.py")):
        text = path.read_text()
        assert "sys.path" not in text, path.name
        assert not PRIVATE.findall(text), (path.name, PRIVATE.findall(text))


def test_the_index_lists_every_script_with_its_command() -> None:
    index = (BENCHMARKS / "README.md").read_text()
    missing = [name for name in SCRIPTS if f"python -m benchmarks.{name}" not in index]
    assert not missing, missing
