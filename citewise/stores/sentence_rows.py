"""Stored sentence vectors (migration m006): one ``chunk_sentences`` row per chunk, written in
its document's transaction and deleted with it; the SQL every backend shares, and the
``Sentences`` role of ``SQLStore``.

A row holds the vectors of the texts the answer path embeds for its chunk (see
``citewise/answer/sentence_vectors.py``) and, for each, an 8-byte key: a hash of the embedder's name
and the text. A reader looks its texts up by key, so a vector is only ever used for the very
text and embedder it was made from; a row written by another embedder, or before the sentence
rules changed, simply matches nothing. ``dtype`` is ``f4`` (float32) or ``f2`` (float16).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from citewise.errors import StoreError
from citewise.kb import KnowledgeBase
from citewise.records import Chunk

if TYPE_CHECKING:
    from citewise.stores.database import Database

KEY_BYTES = 8
DTYPES = {"f4": np.float32, "f2": np.float16}


def text_key(embedder: str, text: str) -> bytes:
    """The lookup key of ``text``'s vector from ``embedder``."""
    return hashlib.blake2b(f"{embedder}\x1f{text}".encode(), digest_size=KEY_BYTES).digest()


@dataclass(frozen=True)
class SentenceVectors:
    """The sentence vectors of one chunk: row ``i`` of ``vectors`` has key ``keys[i]``."""

    keys: tuple[bytes, ...]
    vectors: np.ndarray  # (n, dim), float32 or float16 as stored

    @classmethod
    def build(cls, embedder: str, texts: Sequence[str], vectors: np.ndarray,
              dtype: str = "f4") -> SentenceVectors:
        if len(texts) != len(vectors):
            raise StoreError(f"{len(texts)} sentences but {len(vectors)} sentence vectors")
        return cls(tuple(text_key(embedder, t) for t in texts),
                   np.ascontiguousarray(vectors, dtype=DTYPES[dtype]))

    @property
    def dtype(self) -> str:
        return "f2" if self.vectors.dtype == np.float16 else "f4"

    def lookup(self) -> dict[bytes, np.ndarray]:
        """Key to float32 vector."""
        rows = self.vectors.astype(np.float32)
        return dict(zip(self.keys, rows, strict=True))

    def values(self) -> tuple[str, bytes, bytes]:
        """(dtype, keys, vectors) as the row stores them."""
        return self.dtype, b"".join(self.keys), self.vectors.tobytes()

    @classmethod
    def from_row(cls, dtype: str, keys: bytes, vectors: bytes, dim: int) -> SentenceVectors | None:
        """The row's vectors, or None when it does not fit ``dim`` (never served)."""
        kind = DTYPES.get(dtype)
        keys, vectors = bytes(keys), bytes(vectors)
        n = len(keys) // KEY_BYTES
        if kind is None or len(keys) % KEY_BYTES or len(vectors) != n * dim * np.dtype(kind).itemsize:
            return None
        return cls(tuple(keys[i : i + KEY_BYTES] for i in range(0, len(keys), KEY_BYTES)),
                   np.frombuffer(vectors, dtype=kind).reshape(n, dim))


def check(doc_id: str, chunks: list[Chunk], sentences: Sequence[SentenceVectors | None] | None,
          dim: int) -> list[SentenceVectors | None]:
    """One entry per chunk (None: no sentence vectors for it); raises on a mismatch."""
    if sentences is None:
        return [None] * len(chunks)
    if len(sentences) != len(chunks):
        raise StoreError(f"{doc_id}: {len(chunks)} chunks but {len(sentences)} sentence vector sets")
    for s in sentences:
        if s is not None and len(s.keys) and s.vectors.shape[1] != dim:
            raise StoreError(f"{doc_id}: {s.vectors.shape[1]}-dimensional sentence vectors, "
                             f"the knowledge base holds {dim}")
    return list(sentences)


INSERT_SQL = ("INSERT INTO chunk_sentences (kb_id, chunk_key, dtype, text_keys, vectors) "
              "VALUES (%s, %s, %s, %s, %s)")


def delete_document_sql(key: str) -> str:
    """Delete a document's sentence rows (params: kb id, kb id, doc id); run before its chunks go."""
    return ("DELETE FROM chunk_sentences WHERE kb_id = %s AND chunk_key IN "
            f"(SELECT {key} FROM chunks WHERE kb_id = %s AND doc_id = %s)")


def select_sql(key: str, n: int) -> str:
    """The rows of ``n`` chunk ids (params: kb id, kb id, the ids), with their chunk ids."""
    return ("SELECT c.chunk_id, s.dtype, s.text_keys, s.vectors FROM chunk_sentences s "
            f"JOIN chunks c ON c.kb_id = s.kb_id AND c.{key} = s.chunk_key "
            f"WHERE s.kb_id = %s AND c.kb_id = %s AND c.chunk_id IN ({','.join(['%s'] * n)})")


def missing_sql(key: str) -> str:
    """Keys of chunks without a sentence row, ascending (params: kb id, after key, limit)."""
    return (f"SELECT c.{key} FROM chunks c WHERE c.kb_id = %s AND c.{key} > %s "
            "AND NOT EXISTS (SELECT 1 FROM chunk_sentences s WHERE s.kb_id = c.kb_id "
            f"AND s.chunk_key = c.{key}) ORDER BY c.{key} LIMIT %s")


def backfill_sql(key: str) -> list[str]:
    """A row for a chunk that still exists with the given id (params: kb id, key, then dtype,
    keys, vectors, kb id, key, chunk id); a row already there is replaced."""
    return ["DELETE FROM chunk_sentences WHERE kb_id = %s AND chunk_key = %s",
            "INSERT INTO chunk_sentences (kb_id, chunk_key, dtype, text_keys, vectors) "
            f"SELECT kb_id, {key}, %s, %s, %s FROM chunks "
            f"WHERE kb_id = %s AND {key} = %s AND chunk_id = %s"]


def backfill_params(kb_id: int, rows: list[tuple[int, str, SentenceVectors]]
                    ) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    """Parameters of ``backfill_sql``'s two statements, one tuple per row."""
    return ([(kb_id, key) for key, _, _ in rows],
            [(*said.values(), kb_id, key, chunk_id) for key, chunk_id, said in rows])


def decode(rows: list[tuple[Any, ...]], dim: int) -> dict[str, SentenceVectors]:
    out: dict[str, SentenceVectors] = {}
    for chunk_id, dtype, keys, vectors in rows:
        found = SentenceVectors.from_row(dtype, keys, vectors, dim)
        if found is not None:
            out[chunk_id] = found
    return out


class SentenceTable:
    """The ``Sentences`` role of ``SQLStore`` (``roles.py``) over its database."""

    db: Database

    def sentence_vectors(self, kb: KnowledgeBase, chunk_ids: list[str]) -> dict[str, SentenceVectors]:
        """The stored sentence vectors of these chunks (by chunk id): one statement for any
        real context (900 ids each)."""
        ids = list(dict.fromkeys(chunk_ids))
        rows: list[tuple[Any, ...]] = []
        for at in range(0, len(ids), 900):
            part = ids[at : at + 900]
            rows += self.db.rows(select_sql(self.db.dialect.key, len(part)), (kb.id, kb.id, *part))
        return decode(rows, kb.config.dim)

    def chunks_without_sentences(self, kb: KnowledgeBase, after: int, limit: int) -> list[int]:
        rows = self.db.rows(missing_sql(self.db.dialect.key), (kb.id, after, limit))
        return [int(r[0]) for r in rows]

    def put_sentence_vectors(self, kb: KnowledgeBase,
                             rows: list[tuple[int, str, SentenceVectors]]) -> None:
        """Sentence rows for existing chunks (key, chunk id), one transaction that holds the
        knowledge base; a chunk since replaced or deleted gets none."""
        delete, insert = backfill_sql(self.db.dialect.key)
        first, second = backfill_params(kb.id, rows)
        with self.db.transaction() as cur:
            self.db.lock_kb(cur, kb)
            if rows:
                cur.executemany(delete, first)
                cur.executemany(insert, second)
