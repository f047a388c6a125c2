"""Providers found by name through entry points, as llm and Datasette find their plugins.

Each kind has a group: ``citewise.generators``, ``citewise.embedders``, ``citewise.stores``.
An entry point's name is the spec's prefix (``openai`` in ``openai:gpt-4o-mini``, ``mysql`` in
``mysql://...``) and its value the factory: for a generator ``(argument, embedder) ->
Generator``, for an embedder ``(argument) -> Embedder``, for a store ``(url, cache) -> Store``.
citewise declares its own in its ``pyproject.toml`` like any other package; a package of
yours adds a provider with one module and one entry point::

    [project.entry-points."citewise.generators"]
    mymodel = "mypackage.generator:from_spec"

Factories are imported when first asked for, so listing the names (``citewise ask --help``)
imports no provider. A name may be set in code too (``REGISTRY["x"] = factory``), as tests do.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, MutableMapping
from importlib.metadata import EntryPoint, entry_points
from typing import Any, Generic, TypeVar

from citewise.errors import ConfigError

F = TypeVar("F", bound=Callable[..., Any])


class Registry(MutableMapping[str, F], Generic[F]):
    """The providers of one kind, by name: entry points of ``citewise.KIND``, loaded on use."""

    def __init__(self, group: str) -> None:
        self.group = group
        self._found: dict[str, EntryPoint] | None = None
        self._set: dict[str, F] = {}

    def _entries(self) -> dict[str, EntryPoint]:
        if self._found is None:
            self._found = {e.name: e for e in entry_points(group=self.group)}
            if not self._found:
                raise ConfigError(f"no providers are registered under {self.group!r}: citewise "
                                  "is not installed; install it (pip install -e . in a checkout)")
        return self._found

    def __getitem__(self, name: str) -> F:
        if name not in self._set:
            entry = self._entries()[name]  # KeyError: not a provider's name
            try:
                self._set[name] = entry.load()
            except ImportError as e:
                raise ConfigError(f"the {name!r} provider of {self.group} ({entry.value}) cannot "
                                  f"be imported: {e}") from None
        return self._set[name]

    def __setitem__(self, name: str, factory: F) -> None:
        self._set[name] = factory

    def __delitem__(self, name: str) -> None:
        if name in self._set:
            del self._set[name]
        elif name in self._entries():
            self._entries().pop(name)
        else:
            raise KeyError(name)

    def __iter__(self) -> Iterator[str]:
        return iter(sorted({*self._entries(), *self._set}))

    def __len__(self) -> int:
        return len({*self._entries(), *self._set})

    def __contains__(self, name: object) -> bool:
        return name in self._set or name in self._entries()
