"""README's "Python" section runs exactly as written (the local model, on the sample collection)."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from tests.helpers import ROOT, SAMPLE


def readme_block(heading: str) -> str:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text.split(f"\n## {heading}\n", 1)[1].split("\n## ", 1)[0]
    found = re.search(r"```python\n(.*?)```", section, re.S)
    assert found, f"no python block under ## {heading}"
    return found.group(1)


@pytest.mark.model
def test_readme_python_section_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                    capsys: pytest.CaptureFixture[str]) -> None:
    shutil.copytree(SAMPLE, tmp_path / "examples" / SAMPLE.name)
    monkeypatch.chdir(tmp_path)
    exec(compile(readme_block("Python"), "README.md", "exec"), {"__name__": "__readme__"})
    out = capsys.readouterr().out
    assert "[1] varenicline.md › Dosing schedule" in out  # the answer, with its sources
    assert "Refused: This collection does not cover your question" in out
    assert (tmp_path / "citewise.db").exists()
