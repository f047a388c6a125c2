"""Paths and small helpers shared by the tests (fixtures live in conftest.py and its plugins)."""

from __future__ import annotations

from pathlib import Path

from citewise.kb import KBConfig

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "examples" / "smoking-cessation"
SAMPLE_QUERIES = ROOT / "examples" / "queries"


def hashing_config(**kw: object) -> KBConfig:
    return KBConfig(embedder="hashing:256", dim=256, **kw)  # type: ignore[arg-type]
