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


def test_a_number_typed_against_its_unit_is_two_words_as_when_spaced() -> None:
    from citewise.sentences import words

    assert words("Stay on the 21mg patch, then 14mg; 0.5ML twice") == [
        "stay", "on", "the", "21", "mg", "patch", "then", "14", "mg", "0.5", "ml", "twice"]
    # only a unit splits: ordinals, names with digits and words ending in digits stay whole
    assert words("the 5th day of COVID19 and B12") == ["the", "5th", "day", "of", "covid19", "and", "b12"]


def test_contractions_read_the_same_with_or_without_their_apostrophe() -> None:
    from citewise.sentences import content_words, key_word, stems

    assert stems("ive had ulcers, isnt that from quitting? i dont know") == stems(
        "I've had ulcers, isn't that from quitting? I don't know") == stems("ulcers quitting know")
    assert content_words("What's the WHO's view of the patient's GP?") == ["view", "patient", "gp"]
    assert [key_word(w) for w in ("won't", "she'd", "patch's", "o'brien", "dose")] == [
        "", "", "patch", "o'brien", "dose"]
