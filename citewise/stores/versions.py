"""The version of a knowledge base as the search side reads it: once per question.

Every write transaction bumps a knowledge base's version, and every cache a process keeps of
it (dense matrix, keyword index, chunk records, counts) is served only for the version it was
read at. One question makes a dozen store calls (dense, keyword, vectors, chunks, counts, the
gate's reads), and each used to read the version again: 9 statements a SciFact question.
Inside ``pinned(kb)`` (``retrieval.retrieve`` and ``Engine.decide`` hold it for one question)
the version is read once, at its start, and every call of that thread sees that version. A
write committed by another worker is seen by the next question, as before; a write through
this store ends the pin (``_unpin``), so its own writes are seen at once.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

from citewise.kb import KnowledgeBase
from citewise.stores.database import Database, gone


class KBVersions:
    """Version reads of ``SQLStore``, which provides ``db`` and ``pins`` (a ``threading.local``)."""

    db: Database
    pins: threading.local  # ``kbs``: kb id -> the version pinned for this thread, or None

    @contextmanager
    def pinned(self, kb: KnowledgeBase) -> Iterator[None]:
        """Reads of ``kb`` by this thread inside see its version as read once, now (a
        knowledge base deleted meanwhile reads as gone). Nested, the outer pin holds."""
        held: dict[int, int | None] | None = getattr(self.pins, "kbs", None)
        if held is None:
            held = self.pins.kbs = {}
        if kb.id in held:
            yield
            return
        held[kb.id] = self._read_version(kb)
        try:
            yield
        finally:
            held.pop(kb.id, None)

    def _unpin(self, kb: KnowledgeBase) -> None:
        """After a write of ``kb`` through this store: its pin (if any) no longer holds."""
        held = getattr(self.pins, "kbs", None)
        if held:
            held.pop(kb.id, None)

    def _read_version(self, kb: KnowledgeBase) -> int | None:
        rows = self.db.rows("SELECT version FROM kbs WHERE id = %s", (kb.id,))
        return int(rows[0][0]) if rows else None

    def _current(self, kb: KnowledgeBase) -> int | None:
        """The version of ``kb`` (None: gone): the pinned one, else read now."""
        held = getattr(self.pins, "kbs", None)
        if held and kb.id in held:
            return held[kb.id]
        return self._read_version(kb)

    def _version(self, kb: KnowledgeBase) -> int:
        version = self._current(kb)
        if version is None:
            raise gone(kb)
        return version
