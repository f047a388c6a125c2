"""``BoundedCache``: a memo bounded by bytes (the gate's chunk stem sets)."""

from __future__ import annotations

from citewise.answer import evidence
from citewise.bounded import BoundedCache
from citewise.records import Chunk
from citewise.sentences import stems


def test_least_recently_used_entries_go_past_the_byte_limit() -> None:
    made: list[str] = []

    def make(key: str) -> str:
        made.append(key)
        return key * 2

    cache: BoundedCache[str, str] = BoundedCache(100, lambda k, v: 40)
    for key in ("a", "b", "a", "c"):  # "a" used again, so "b" is the oldest when "c" comes
        assert cache.get(key, make) == key * 2
    assert made == ["a", "b", "c"] and len(cache) == 2 and cache.used == 80
    cache.get("b", make)
    assert made[-1] == "b"  # it had gone
    cache.get("a", make)
    assert made[-1] == "a"  # pushed out by "b"
    big: BoundedCache[str, str] = BoundedCache(10, lambda k, v: 50)
    assert big.get("x", make) == "xx" and len(big) == 1  # the newest stays, even over the limit


def test_chunk_stems_are_the_stems_and_bounded_by_bytes() -> None:
    chunk = Chunk("d", 0, ("Dosing", "Adults"), "Doses were titrated; dosing twice daily.", "Guide")
    assert evidence.chunk_stems(chunk) == frozenset(stems("Guide Dosing Adults " + chunk.text))
    cache = evidence._chunk_stems
    assert cache.limit_bytes == evidence.CHUNK_STEMS_BYTES
    before = cache.used
    evidence.chunk_stems(Chunk("d", 1, (), "x" * 10_000))
    assert cache.used - before >= 10_000  # the key's text is charged: it stays alive with it
