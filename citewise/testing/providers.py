"""Conformance tests for providers: what every embedder and every generator must do, whoever
wrote it. A provider's tests subclass one and give the fixture it asks for::

    class TestMyEmbedder(EmbedderConformance):
        @pytest.fixture
        def embedder(self):
            return MyEmbedder("model", http_client=...)   # a mocked transport: no network

    class TestMyGenerator(GeneratorConformance):
        @pytest.fixture
        def generator(self):
            return MyGenerator("model", http_client=...)

A generator under test is given the passages of ``CONTEXT``; a hosted one's mocked provider
should answer with a draft citing them (``[1]``). Importing this module needs pytest.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np
import pytest

from citewise.embedders import REGISTRY as EMBEDDERS
from citewise.embedders import Embedder
from citewise.generators import REGISTRY as GENERATORS
from citewise.generators import Generator, StreamingGenerator
from citewise.records import Candidate, Chunk, Draft

QUESTION = "How long do nicotine withdrawal symptoms last?"
CONTEXT: Sequence[Candidate] = (
    Candidate(Chunk("withdrawal.md", 0, ("Withdrawal",), "Withdrawal symptoms peak in the first "
                    "week and fade over two to four weeks.", "Withdrawal"), 0.8),
    Candidate(Chunk("nrt.md", 0, ("Patches",), "A nicotine patch releases nicotine slowly over "
                    "16 or 24 hours.", "Patches"), 0.5),
)


class EmbedderConformance:
    """An ``Embedder``: unit-length float32 rows, one per text, the same text the same row."""

    @pytest.fixture
    def embedder(self) -> Embedder:
        raise NotImplementedError("a provider's tests give the embedder")

    def test_rows_are_unit_length_float32_one_per_text(self, embedder: Embedder) -> None:
        v = embedder.embed(["nicotine patch", "varenicline dose", "withdrawal"])
        assert v.dtype == np.float32 and v.shape == (3, embedder.dim)
        assert np.allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-5)

    def test_the_same_text_gives_the_same_row(self, embedder: Embedder) -> None:
        a, b, c = embedder.embed(["nicotine patch", "varenicline dose", "nicotine patch"])
        assert np.allclose(a, c, atol=1e-5) and not np.allclose(a, b, atol=1e-3)

    def test_no_texts_no_rows(self, embedder: Embedder) -> None:
        assert embedder.embed([]).shape[0] == 0

    def test_a_text_longer_than_the_model_reads_is_embedded_whole(self, embedder: Embedder) -> None:
        long = "Withdrawal symptoms peak in the first week. " * (embedder.max_tokens // 4 + 8)
        assert embedder.count_tokens(long) > embedder.max_tokens
        v = embedder.embed([long])
        assert v.shape == (1, embedder.dim) and np.isfinite(v).all()

    def test_its_name_is_a_spec_of_a_registered_provider(self, embedder: Embedder) -> None:
        assert embedder.name.partition(":")[0] in EMBEDDERS


class GeneratorConformance:
    """A ``Generator``: a ``Draft`` of text citing the passages given; a streaming one streams
    the same text."""

    @pytest.fixture
    def generator(self) -> Generator:
        raise NotImplementedError("a provider's tests give the generator")

    def test_a_draft_is_text_citing_the_passages_given(self, generator: Generator) -> None:
        draft = generator.generate(QUESTION, CONTEXT)
        assert isinstance(draft, Draft) and draft.text.strip()
        cited = {int(n) for n in re.findall(r"\[(\d+)\]", draft.text)}
        assert cited and cited <= set(range(1, len(CONTEXT) + 1)), draft.text

    def test_a_stream_is_the_same_draft_in_pieces(self, generator: Generator) -> None:
        if not isinstance(generator, StreamingGenerator):
            pytest.skip("not a streaming generator")
        pieces = list(generator.stream(QUESTION, CONTEXT))
        assert all(isinstance(p, str) for p in pieces)
        assert "".join(pieces).strip() == generator.generate(QUESTION, CONTEXT).text.strip()

    def test_its_name_is_a_spec_of_a_registered_provider(self, generator: Generator) -> None:
        assert generator.name.partition(":")[0] in GENERATORS
