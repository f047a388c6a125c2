"""What the conformance classes share: small knowledge bases and documents with made-up vectors,
and the base class with its two hooks (``reopen``, ``table``)."""

from __future__ import annotations

from typing import Any, cast

import numpy as np

from citewise.kb import KBConfig
from citewise.records import Chunk, Document, Section
from citewise.stores import open_store
from citewise.stores.roles import Store
from citewise.stores.sentence_rows import SentenceVectors
from citewise.stores.sql import SQLStore

DIM = 8


def config() -> KBConfig:
    return KBConfig(embedder="hashing:8", dim=DIM)


def document(doc_id: str, *texts: str) -> tuple[Document, list[Chunk], np.ndarray]:
    """A document of one chunk per text, with random unit vectors fixed by the texts."""
    doc = Document(doc_id, f"Title {doc_id}", (Section(("Part",), texts),), doc_id)
    chunks = [Chunk(doc_id, i, ("Part",), t, doc.title) for i, t in enumerate(texts)]
    rng = np.random.default_rng(abs(hash(texts)) % 2**32)
    v = rng.normal(size=(len(texts), DIM)).astype(np.float32)
    return doc, chunks, v / np.linalg.norm(v, axis=1, keepdims=True)


def sentences(chunks: list[Chunk], embedder: str = "hashing:8", dtype: str = "f4"
              ) -> list[SentenceVectors]:
    """Two made-up sentence vectors per chunk, keyed by its text's words."""
    out = []
    for c in chunks:
        rng = np.random.default_rng(abs(hash(c.text)) % 2**32)
        texts = [f"{c.text} first", f"{c.text} second"]
        out.append(SentenceVectors.build(embedder, texts, rng.normal(size=(2, DIM)), dtype))
    return out


class Conformance:
    """The hooks every conformance class uses; the ``store`` fixture is the backend's."""

    def reopen(self, store: Store) -> Store:
        """A second store on the same database (test servers have no password)."""
        return open_store(store.url.replace(":***@", "@"))

    def table(self, store: Store, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        """Rows of the store's own tables (``%s`` placeholders on every SQL backend)."""
        return cast(SQLStore, store).db.rows(sql, params)
