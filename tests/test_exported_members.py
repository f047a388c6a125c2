"""The package's public surface: ``citewise.__all__`` pinned, every name resolving, the version
from the package metadata, and ``import citewise`` staying light (names load on first use)."""

from __future__ import annotations

import importlib.metadata
import subprocess
import sys

import pytest

import citewise
from tests.helpers import ROOT

EXPORTED = [
    "AccessError",
    "AlreadyExistsError",
    "Answer",
    "BusyError",
    "Candidate",
    "Citation",
    "CitewiseError",
    "ConfigError",
    "Decided",
    "Decision",
    "DimensionMismatchError",
    "DocumentError",
    "Dropped",
    "EmbedderError",
    "Engine",
    "FeedbackGivenError",
    "FetchError",
    "ForbiddenError",
    "GenerationError",
    "IngestReport",
    "JobError",
    "KnowledgeBase",
    "KnowledgeBaseError",
    "NotAllowedError",
    "PassageLinkError",
    "QueryError",
    "QueryLogError",
    "RateLimitError",
    "Refusal",
    "Retrieved",
    "Signals",
    "Store",
    "StoreError",
    "TenantError",
    "TenantExistsError",
    "TooFewLabelsError",
    "Turn",
    "UnknownNameError",
    "UnsupportedTypeError",
    "UploadTooLargeError",
    "__version__",
    "open_store",
]


def test_all_is_pinned() -> None:
    assert citewise.__all__ == EXPORTED


def test_every_error_is_exported() -> None:
    from citewise import errors

    defined = {name for name, value in vars(errors).items()
               if isinstance(value, type) and issubclass(value, Exception)
               and value.__module__ == errors.__name__}
    assert defined <= set(citewise.__all__), sorted(defined - set(citewise.__all__))


def test_every_exported_name_is_citewise_own() -> None:
    for name in citewise.__all__:
        if name == "__version__":
            continue
        member = getattr(citewise, name)
        assert member.__module__.startswith("citewise."), name
        assert name in dir(citewise)
    assert issubclass(citewise.AlreadyExistsError, citewise.CitewiseError)


def run(code: str, *flags: str) -> str:
    done = subprocess.run([sys.executable, *flags, "-c", code], env={"PYTHONPATH": str(ROOT)},
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout.strip()


@pytest.mark.heavy
def test_version_comes_from_the_package_metadata() -> None:
    assert citewise.__version__ == importlib.metadata.version("citewise")
    # a source tree that was never installed: no metadata to read (an editable install leaves
    # an egg-info in the checkout, so the lookup itself is made to find nothing)
    assert run("import importlib.metadata as m\n"
               "def nothing(name): raise m.PackageNotFoundError(name)\n"
               "m.version = nothing\n"
               "import citewise; print(citewise.__version__)") == "0+unknown"


@pytest.mark.heavy
def test_import_is_light_and_names_load_on_first_use() -> None:
    shown = run("import sys, citewise\n"
                "print(sorted(m for m in sys.modules if m.startswith(('citewise', 'numpy'))))\n"
                "citewise.Engine\n"
                "print('citewise.engine' in sys.modules)")
    assert shown.splitlines() == ["['citewise', 'citewise.errors']", "True"]
