"""A scripted generator, for tests only: it returns the draft its spec names, or fails.

    scripted:TEXT            drafts TEXT verbatim, whatever the question and context
    scripted:error:MESSAGE   raises GenerationError(MESSAGE), as a provider failing after retries

It lets a test drive each path after the gate (an uncited claim that the citation check
must refuse, a generator that fails) with no model and no network.
"""

from __future__ import annotations

from collections.abc import Sequence

from citewise.errors import ConfigError, GenerationError
from citewise.records import Candidate, Draft


class ScriptedGenerator:
    def __init__(self, script: str) -> None:
        if not script:
            raise ConfigError("scripted generator needs a draft: scripted:TEXT or scripted:error:MSG")
        self.script = script
        self.name = f"scripted:{script}"

    def generate(self, question: str, context: Sequence[Candidate]) -> Draft:
        if self.script.startswith("error:"):
            raise GenerationError(self.script.removeprefix("error:") or "scripted failure")
        return Draft(self.script, self.name)


def from_spec(arg: str, embedder: object) -> ScriptedGenerator:
    """``scripted:TEXT``: for tests."""
    return ScriptedGenerator(arg)
