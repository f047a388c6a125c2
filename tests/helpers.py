"""Paths and small helpers shared by the tests (fixtures live in conftest.py and its plugins)."""

from __future__ import annotations

from pathlib import Path

from citewise.kb import KBConfig

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "examples" / "smoking-cessation"
SAMPLE_QUERIES = ROOT / "examples" / "queries"


def hashing_config(**kw: object) -> KBConfig:
    return KBConfig(embedder="hashing:256", dim=256, **kw)  # type: ignore[arg-type]


def sample_sqlite(path: Path) -> Path:
    """A SQLite store at ``path`` holding the sample collection as ``smoking``, embedded by the
    hashing embedder (no model): what the console tests open."""
    from citewise.engine import Engine
    from citewise.stores.sqlite import open_sqlite

    store = open_sqlite(path)
    engine = Engine(store)
    engine.ingest(engine.open_kb("smoking", embedder="hashing:256"), [SAMPLE])
    store.close()
    return path
