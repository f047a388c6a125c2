"""A knowledge base's chunk records in memory, read in the same statement as its keyword index.

Fusion reads the ~85 candidates of every question (``store.chunks``), the citation check
and feedback a chunk by its id (``store.chunk_by_id``). From SQL that was one statement and
~85 rows decoded per question (``json.loads`` of each heading path, a ``Chunk`` made per
row): about 2.3 ms of a SciFact question's ~21 ms CPU. The keyword index
(``keyword_index.py``) already streams every chunk row of the knowledge base once per
version, so the same read keeps the records too, and while the index is cached for the
knowledge base's current version these two calls are answered from it, with the very
``Chunk`` values the database path returns (``tests/test_keyword_index.py`` pins the
equality). Knowledge bases above ``keyword_index_max_chunks`` chunks, and those on the
approximate (ANN) path, keep no table and are read from the database as before.

The table also holds each chunk's stems as the gate reads them (``sentences.stem_set``,
citewise's light stemmer, not the index's Porter stems): on a question's first sight of a
candidate, stemming it took ~50 us, ~2.5 ms of a SciFact question's gate. Here it is paid
once per version, at build (+~50% of the build: 0.56 s for SciFact's 11,878 chunks), and
held as a tuple (~0.5 kB a chunk; a frozenset would be ~3 kB). The gate only asks which of
the question's terms each candidate holds: intersecting the question's set with each tuple
costs ~0.5 ms a SciFact question, as a set made of each tuple did. Held inverted instead
(each stem's rows, in CSR arrays) a look-up took ~0.26 ms, at the price of more work in every
knowledge base's first question (the build); the load benchmark's 2,000-kb profile varies too
much between runs of the same code (30-47 requests/s) to tell that price, so the tuple stays.

Headings, titles and document ids repeat along a document's chunks and are held once per
table; stems are interned (``sys.intern``, a call in C: held once per table through a method
of this class, they were ~0.9 s of the 4 s that SciFact's first build took).
``nbytes`` counts the texts, those shared strings, every record, the stems and the key and id
arrays, so the table counts against the store's cache budget with its index.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from citewise.records import Chunk
from citewise.sentences import stem_set

INTERNED_BYTES = 40  # a stem's slot in the interpreter's table of interned strings
# a Chunk's own memory (the object and its attribute dict) and its list slot, measured once
_RECORD_BYTES = sys.getsizeof(Chunk("", 0, (), "")) + sys.getsizeof(
    Chunk("", 0, (), "").__dict__) + 8


@dataclass(frozen=True)
class ChunkTable:
    """Record ``i`` is chunk ``keys[i]`` (ascending, the keyword index's rows); ``ids`` are
    the chunk ids (utf-8) in ascending order, ``id_rows[j]`` the record of ``ids[j]``."""

    keys: np.ndarray  # int64, ascending
    records: tuple[Chunk, ...]
    stems: tuple[tuple[str, ...], ...]  # the gate's stems of each record
    ids: np.ndarray  # bytes, ascending
    id_rows: np.ndarray  # int64
    nbytes: int

    def chunks(self, keys: Iterable[int]) -> dict[int, Chunk]:
        """``store.chunks``: the records of ``keys``; a key not here is left out, as a read
        by key leaves out rows of no chunk of this knowledge base."""
        wanted = np.asarray([int(k) for k in keys], dtype=np.int64)
        if not len(wanted) or not len(self.keys):
            return {}
        at = np.minimum(np.searchsorted(self.keys, wanted), len(self.keys) - 1)
        held = self.keys[at] == wanted
        records = self.records
        return {int(k): records[i] for k, i in zip(wanted[held].tolist(), at[held].tolist(),
                                                    strict=True)}

    def stem_sets(self, keys: Iterable[int], terms: Iterable[str]) -> list[frozenset[str]] | None:
        """Which of ``terms`` each of ``keys`` holds among the gate's stems, in that order: its
        stem set cut to ``terms``. None if a key is not here."""
        wanted = np.asarray([int(k) for k in keys], dtype=np.int64)
        if not len(wanted):
            return []
        if not len(self.keys):
            return None
        at = np.minimum(np.searchsorted(self.keys, wanted), len(self.keys) - 1)
        if (self.keys[at] != wanted).any():
            return None
        asked, stems = frozenset(terms), self.stems
        return [asked.intersection(stems[i]) for i in at.tolist()]

    def by_id(self, chunk_id: str) -> Chunk | None:
        """``store.chunk_by_id``: the chunk whose stored id is ``chunk_id``, else None."""
        want = chunk_id.encode()
        at = int(np.searchsorted(self.ids, want))
        if at < len(self.ids) and self.ids[at] == want:
            return self.records[int(self.id_rows[at])]
        return None


class TableBuilder:
    """Collects the records while the keyword index's rows stream past (``rows`` passes
    through ``(key, title, section, text)``, what ``keyword_index.build`` reads)."""

    def __init__(self) -> None:
        self.keys: list[int] = []
        self.records: list[Chunk] = []
        self.stems: list[tuple[str, ...]] = []
        self.ids: list[bytes] = []
        self._shared: dict[str, Any] = {}  # doc ids, titles, heading paths: held once
        self._bytes = 0

    def _once(self, value: str) -> str:
        held = self._shared.get(value)
        if held is None:
            held = self._shared[value] = value
            self._bytes += sys.getsizeof(value) + 100  # and its slot in the table
        return str(held)

    def rows(self, rows: Iterable[tuple[Any, ...]]) -> Iterator[tuple[Any, str, str, str]]:
        """Rows ``(key, doc_id, ordinal, section json, text, title, chunk_id)`` in ascending
        key order, kept, and passed on as ``keyword_index.build`` reads them."""
        shared = self._shared
        for key, doc_id, ordinal, section, text, title, chunk_id in rows:
            path = shared.get("\x00" + section)
            if path is None:
                path = shared["\x00" + section] = tuple(self._once(h) for h in json.loads(section))
                self._bytes += sys.getsizeof(path) + 100
            self.keys.append(int(key))
            record = Chunk(self._once(doc_id), ordinal, path, text, self._once(title))
            self.records.append(record)
            held = tuple(map(sys.intern, stem_set(record.title, record.section, text)))
            self.stems.append(held)
            self._bytes += sys.getsizeof(held)
            self.ids.append(str(chunk_id).encode())
            self._bytes += sys.getsizeof(text) + sys.getsizeof(ordinal)
            yield key, title, section, text

    def table(self) -> ChunkTable:
        keys = np.asarray(self.keys, dtype=np.int64)
        ids = np.asarray(self.ids, dtype=bytes) if self.ids else np.zeros(0, dtype="S1")
        order = np.argsort(ids, kind="stable")
        stems = set().union(*self.stems)  # interned: each held once however many hold it
        nbytes = (self._bytes + _RECORD_BYTES * len(self.records) + keys.nbytes + ids.nbytes
                  + 8 * len(order) + sum(map(sys.getsizeof, stems)) + INTERNED_BYTES * len(stems))
        return ChunkTable(keys, tuple(self.records), tuple(self.stems), ids[order],
                          order.astype(np.int64), nbytes)


__all__ = ["ChunkTable", "TableBuilder"]
