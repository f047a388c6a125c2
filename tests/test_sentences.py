from citewise.sentences import content_words, split_sentences, stem


def test_clinical_abbreviations_do_not_end_sentences() -> None:
    text = (
        "Dr. Smith et al. reported it (see Fig. 2). Take 0.5 mg b.i.d. for 3 days, i.e. until "
        "day 4. Then 1 mg twice daily. J. Smith agreed, e.g. in approx. 1.5 times the cases."
    )
    assert split_sentences(text) == [
        "Dr. Smith et al. reported it (see Fig. 2).",
        "Take 0.5 mg b.i.d. for 3 days, i.e. until day 4.",
        "Then 1 mg twice daily.",
        "J. Smith agreed, e.g. in approx. 1.5 times the cases.",
    ]


def test_questions_exclamations_quotes_and_lists() -> None:
    text = 'Is it safe? Yes! "Quite." Next one.\n\n- Days 1 to 3: 0.5 mg.\n- Day 4: 1 mg.'
    assert split_sentences(text) == [
        "Is it safe?", "Yes!", '"Quite."', "Next one.", "Days 1 to 3: 0.5 mg.", "Day 4: 1 mg.",
    ]


def test_empty_and_whitespace() -> None:
    assert split_sentences("") == []
    assert split_sentences("   \n\n ") == []


def test_content_words_keep_decimals_and_drop_stop_words() -> None:
    assert content_words("What is the 0.5 mg dose of the patch?") == ["0.5", "mg", "dose", "patch"]


def test_stem_joins_word_forms() -> None:
    assert stem("dosed") == stem("doses") == stem("dosing") == stem("dose")
    assert stem("weeks") == stem("week")


def test_stems_are_the_stems_of_the_content_words() -> None:
    from citewise.sentences import content_words, stem, stems

    for text in ("Doses were dosed; dosing DOSES nightly.", "Don't take 0.5 mg, e.g. at night", "", "the of"):
        assert stems(text) == {stem(w) for w in content_words(text)}
    assert stems("Doses were dosed; dosing DOSES nightly.") == {"dos", "night"}
