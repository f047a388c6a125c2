import pytest

from citewise.errors import UnknownNameError
from citewise.ingest.chunking import OVERLAP_SENTENCES, SectionsChunker, WindowChunker, get_chunker
from citewise.records import Document, Section
from citewise.sentences import split_sentences


def words(text: str) -> int:
    return len(text.split())


def doc(*sections: Section, title: str = "Guide") -> Document:
    return Document("guide.md", title, sections, "guide.md")


LONG = " ".join(f"Sentence number {i} says something about dose {i}.0 mg." for i in range(60))


def test_heading_path_is_embedded_on_its_own_lines() -> None:
    chunks = SectionsChunker(words, 512).chunk(doc(Section(("Methods", "Design"), ("A trial.",))))
    assert chunks[0].embed_text == "Guide\n## Methods\n### Design\nA trial."
    assert chunks[0].text == "A trial."


def test_long_paragraph_split_at_sentences_with_two_sentence_overlap_never_truncated() -> None:
    chunker = SectionsChunker(words, 60)
    chunks = chunker.chunk(doc(Section(("Dosing",), (LONG,))))
    assert len(chunks) > 1
    for c in chunks:
        assert words(c.embed_text) <= 60
    sentences = split_sentences(LONG)
    covered = [s for s in sentences if any(s in c.text for c in chunks)]
    assert covered == sentences  # no text lost
    for a, b in zip(chunks, chunks[1:], strict=False):
        assert split_sentences(a.text)[-2:] == split_sentences(b.text)[:2]


def test_overlap_argument_sets_the_sentences_repeated() -> None:
    assert SectionsChunker(words, 60).overlap == OVERLAP_SENTENCES == 2
    shipped = SectionsChunker(words, 60).chunk(doc(Section(("Dosing",), (LONG,))))
    assert [c.text for c in SectionsChunker(words, 60, overlap=2).chunk(
        doc(Section(("Dosing",), (LONG,))))] == [c.text for c in shipped]
    sentences = split_sentences(LONG)
    pieces = {}
    for overlap in (0, 1, 3):
        chunks = SectionsChunker(words, 60, overlap=overlap).chunk(doc(Section(("Dosing",), (LONG,))))
        pieces[overlap] = chunks
        assert all(words(c.embed_text) <= 60 for c in chunks)
        said = [s for c in chunks for s in split_sentences(c.text)]
        assert sorted(set(said), key=sentences.index) == sentences  # no text lost
        for a, b in zip(chunks, chunks[1:], strict=False):
            shared = [s for s in split_sentences(b.text) if s in split_sentences(a.text)]
            assert shared == split_sentences(a.text)[len(split_sentences(a.text)) - overlap:]
        assert len(said) == len(sentences) + overlap * (len(chunks) - 1)
    assert len(pieces[0]) < len(shipped) < len(pieces[3])
    with pytest.raises(ValueError, match="overlap"):
        SectionsChunker(words, 60, overlap=-1)


def test_limit_is_the_smaller_of_512_and_the_models() -> None:
    assert get_chunker("sections", words, 254).limit == 254
    assert get_chunker("sections", words, 8192).limit == 512
    with pytest.raises(UnknownNameError, match="sections, window"):
        get_chunker("nope", words, 10)


def test_short_paragraphs_and_lists_join_their_neighbours() -> None:
    chunks = SectionsChunker(words, 60).chunk(
        doc(Section(("Dosing",), ("The schedule is:", "- Day 1: 0.5 mg\n- Day 8: 1 mg", "X " * 50)))
    )
    assert chunks[0].text == "The schedule is:\n\n- Day 1: 0.5 mg\n- Day 8: 1 mg"
    assert len(chunks) == 2


def test_chunk_ids_are_content_hashes() -> None:
    a = SectionsChunker(words).chunk(doc(Section(("S",), ("Same text.",))))
    b = SectionsChunker(words).chunk(doc(Section(("S",), ("Same text.",))))
    c = SectionsChunker(words).chunk(doc(Section(("T",), ("Same text.",))))
    assert a[0].id == b[0].id != c[0].id


def test_window_chunks_about_2800_chars_with_350_overlap_whole_sentences() -> None:
    text = " ".join(f"This is sentence {i} of a long support article about returns." for i in range(200))
    faq = Section(("FAQ", "Can I return it?"), ("Yes, within 30 days.",), "faq")
    table = Section(("Pricing",), ("| Plan | Price |\n| Basic | 10 |",), "table")
    chunks = WindowChunker().chunk(doc(Section(("Returns",), (text,)), faq, table))
    prose = [c for c in chunks if c.section == ("Returns",)]
    assert all(len(c.text) <= 2800 for c in prose)
    assert all(len(c.text) > 2300 for c in prose[:-1])
    sentences = set(split_sentences(text))
    for c in prose:
        assert set(split_sentences(c.text)) <= sentences  # never cuts a sentence
    for a, b in zip(prose, prose[1:], strict=False):
        overlap = [s for s in split_sentences(b.text) if s in split_sentences(a.text)]
        assert 0 < sum(len(s) + 1 for s in overlap) <= 350 + 1
    assert [c.text for c in chunks if c.section != ("Returns",)] == [
        "Yes, within 30 days.", "| Plan | Price |\n| Basic | 10 |",
    ]


def test_ingest_chunks_with_the_chunker_it_is_given(engine) -> None:
    from citewise.errors import ConfigError

    shipped = engine.open_kb("shipped", embedder="hashing:256")  # 512 tokens: LONG in 2 chunks
    given = engine.open_kb("given", embedder="hashing:256")
    engine.ingest(shipped, [doc(Section(("Dosing",), (LONG,)))])
    engine.ingest(given, [doc(Section(("Dosing",), (LONG,)))], chunker=SectionsChunker(words, 60, 0))
    expected = SectionsChunker(words, 60, 0).chunk(doc(Section(("Dosing",), (LONG,))))
    assert engine.store.count_chunks(shipped) == 2
    assert engine.store.count_chunks(given) == len(expected) > 2
    with pytest.raises(ConfigError, match="chunked with 'sections', not 'window'"):
        engine.ingest(given, [doc(Section(("Dosing",), ("Other text.",)))], chunker=WindowChunker())


@pytest.mark.model
def test_counting_units_once_chunks_as_counting_every_prefix_with_the_local_model() -> None:
    from citewise.embedders.local import LocalEmbedder
    from citewise.ingest.documents import read_all
    from tests.helpers import SAMPLE

    model = LocalEmbedder()
    assert model.tokens_add_up
    docs = [d for d in read_all([SAMPLE]) if isinstance(d, Document)]
    long = doc(Section(("Dosing",), (LONG * 12,)), title="A long one")
    table = doc(Section(("Plans",), (
        "| Plan | Price |\n" + "\n".join(f"| Plan number {i} with a long name | {i}0 |"
                                       for i in range(80)),), "table"), title="Prices")
    huge = doc(Section(("Terms",), ("Short start. " + " ".join(["word"] * 150) + ". Short end.",)),
               title="One sentence longer than the limit")
    for limit in (60, 254):
        every = SectionsChunker(model.count_tokens, limit)
        once = SectionsChunker(model.count_tokens, limit, additive=True)
        for d in [*docs, long, table, huge]:
            assert [c.text for c in once.chunk(d)] == [c.text for c in every.chunk(d)]
