"""The extractive generator's choices: pronouns quoted only with what they refer to, a list's
introduction with its items, a passage's units in its order, numbers when a quantity is asked."""

from __future__ import annotations

import pytest

from citewise.answer import citations
from citewise.embedders import get_embedder
from citewise.generators.extractive import ExtractiveGenerator, needs, refers_back
from citewise.records import Candidate, Chunk


@pytest.mark.parametrize(("unit", "refers"), [
    ("It contains no nicotine.", True),
    ("In clinical trials it affected roughly three in ten people.", True),
    ("For this reason the maximum dose must not be exceeded.", True),
    ("Such events were more common in people with a psychiatric history.", True),
    ("These changes are real effects of withdrawal.", True),
    ("- They are temporary.", True),
    ("Some people notice that they cough more for a few weeks.", False),
    ("When a person stops smoking, their metabolic rate falls.", False),
    ("Nausea is the most common side effect.", False),
    ("| It | Dose |\n| a | b |", False),
])
def test_a_pronoun_subject_refers_back(unit: str, refers: bool) -> None:
    assert refers_back(unit) is refers


def test_what_a_unit_needs_quoted_with_it() -> None:
    units = ["Nausea is the most common side effect.", "In clinical trials it affected three in ten.",
             "It was usually mild.", "It often faded.", "The schedule is:", "- Days 1 to 3: 0.5 mg.",
             "- Day 8 onwards: 1 mg."]
    assert needs(units, 1) == [0, 1]
    assert needs(units, 2) == [0, 1, 2]
    assert needs(units, 3) is None  # reaches back further than two units
    assert needs(units[1:], 0) is None  # nothing before it in the passage
    assert needs(units, 4) == [4, 5, 6]  # an introduction with its list
    assert needs(units, 6) == [4, 6]  # an item under its introduction
    assert needs(units[:6], 4) == [4, 5]


def cand(text: str, section: str = "Side effects") -> Candidate:
    return Candidate(Chunk("varenicline.md", 0, (section,), text, "Varenicline"), 0.6)


@pytest.fixture
def generator() -> ExtractiveGenerator:
    return ExtractiveGenerator(get_embedder("hashing:256"))


SIDE_EFFECTS = ("Nausea is the most common side effect. In clinical trials it affected roughly "
                "three in ten people taking the full dose. Taking the tablet with food helps.")


def test_a_pronoun_sentence_is_quoted_after_the_sentence_it_refers_to(generator) -> None:
    question = "In clinical trials how many people taking the full dose were affected?"
    draft = generator.generate(question, [cand(SIDE_EFFECTS)]).text
    assert draft.startswith("Nausea is the most common side effect. [1] In clinical trials it affected")
    alone = generator.generate(question, [cand(SIDE_EFFECTS.split(". ", 1)[1])]).text
    assert "it affected" not in alone  # with nothing to refer to, never quoted


def test_a_passage_keeps_its_order_and_the_check_keeps_every_unit(generator) -> None:
    passage = ("The 24-hour patch can cause vivid dreams, so it can be taken off at bedtime. A new "
               "patch is put on each morning. Patches come in 16-hour and 24-hour versions.")
    question = "Which versions do patches come in, and can the 24-hour patch be taken off at bedtime?"
    _, units, score = generator.scored(question, [cand(passage, "Patch")])
    assert score[2] > score[0]  # the last sentence answers best, yet comes second
    draft = generator.generate(question, [cand(passage, "Patch")]).text
    assert draft.index("The 24-hour patch") < draft.index("Patches come in")
    checked = citations.check(draft, [cand(passage, "Patch")])
    assert not checked.dropped


def test_a_number_the_question_asks_for_is_preferred(generator) -> None:
    passage = ("Seizures are the main safety concern with bupropion and doctors check for them. "
               "Seizures happen in about 1 in 1,000 people on bupropion at the usual dose.")
    context = [cand(passage, "Seizure risk")]
    _, _, score = generator.scored("How likely are seizures on bupropion?", context)
    assert score[1] > score[0]  # the sentence with the number ranks first
    assert "1 in 1,000" in generator.generate("How likely are seizures on bupropion?", context).text
    _, _, score = generator.scored("Are seizures a concern with bupropion?", context)
    assert score[1] < score[0]  # no quantity asked: no preference for it
