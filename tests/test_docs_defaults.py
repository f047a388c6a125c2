"""The defaults ``docs/settings.md`` quotes are the code's: its two tables (a knowledge base's
settings, the service's ``CITEWISE_*`` settings) are made here from the code and must match
the page row for row, so a default changed in the code fails until the page says it too. A
failure prints the table the page should hold."""

from __future__ import annotations

import dataclasses
import re

from pydantic import SecretStr

from citewise.answer import gate
from citewise.api.settings import Settings
from citewise.embedders import DEFAULT_EMBEDDER
from citewise.generators import DEFAULT_GENERATOR
from citewise.ingest.chunking import DEFAULT_CHUNKER
from citewise.kb import KBConfig, Retrieval
from tests.helpers import ROOT

PAGE = ROOT / "docs" / "settings.md"


def shown(value: object) -> str:
    if value is None:
        return "unset"
    if isinstance(value, bool):
        return "`true`" if value else "`false`"
    if isinstance(value, list):
        return "`" + ",".join(map(str, value)) + "`" if value else "none"
    if isinstance(value, int) and value >= 10_000:
        return f"`{value:_}`"
    return f"`{value}`"


def kb_table() -> list[str]:
    policy = gate.DEFAULT_POLICY[DEFAULT_EMBEDDER]
    threshold = gate.DEFAULT_THRESHOLDS[(DEFAULT_EMBEDDER, policy)]
    rows = [("embedder", shown(DEFAULT_EMBEDDER)), ("chunker", shown(DEFAULT_CHUNKER)),
            ("generator", shown(DEFAULT_GENERATOR)),
            ("reader", shown(KBConfig.__dataclass_fields__["reader"].default)),
            ("gate_policy", f"`{policy}` at `{threshold}` (the local model's; `top1` at 0.5 for others)")]
    rows += [(f.name, shown(f.default)) for f in dataclasses.fields(Retrieval)]
    return ["| setting | default |", "| --- | --- |", *(f"| `{k}` | {v} |" for k, v in rows)]


def server_table() -> list[str]:
    rows = ["| variable | default | what |", "| --- | --- | --- |"]
    for name, field in Settings.model_fields.items():
        default = field.get_default(call_default_factory=True)
        if isinstance(default, SecretStr):
            default = "(secret)"
        what = " ".join((field.description or "").split()).replace("|", "\\|")
        rows.append(f"| `CITEWISE_{name.upper()}` | {shown(default)} | {what} |")
    return rows


def page_table(marker: str) -> list[str]:
    text = PAGE.read_text()
    found = re.search(rf"<!-- {marker} -->\n(.*?)\n<!-- end -->", text, re.S)
    assert found, f"{PAGE} has no <!-- {marker} --> table"
    return found.group(1).splitlines()


def test_the_knowledge_base_defaults_are_the_codes() -> None:
    expected = kb_table()
    assert page_table("kb defaults") == expected, "\n" + "\n".join(expected)


def test_the_service_settings_are_the_codes() -> None:
    expected = server_table()
    assert page_table("server settings") == expected, "\n" + "\n".join(expected)
