"""Follow-up questions made standalone from the conversation before them. Offline and pure.

``standalone(question, earlier)`` rewrites a follow-up so that it can be retrieved on its own,
from the user's earlier questions (oldest first):

- a pronoun (it, its, they, them, their; this, that, these, those used on their own) becomes
  the phrase it refers to: "How is it dosed?" after "What is varenicline?" is "How is
  varenicline dosed?". The referent is the subject of the latest earlier question that has
  one: the phrase after "of", "about", "on" or "for" if there is one ("the side effects of
  varenicline" -> varenicline), else its first noun phrase; a plural pronoun prefers a
  plural phrase ("Does bupropion cause seizures?" then "How common are they?" -> seizures);
  "that trial" after "What is the EAGLES trial?" is "EAGLES trial";
- a singular pronoun with nothing earlier that agrees with it ("How is it dosed?" after "How
  long do withdrawal symptoms last?") is left as asked: a rewrite would be nonsense;
- "What about X?", "How about X?", "And X?", "And for X?" ask the earlier question again of
  X: after "How is varenicline dosed?", "What about bupropion?" is "How is bupropion dosed?";
  an X that opens as an earlier phrase does ("the lungs" after "... help the heart", "with
  bupropion" after "... with nicotine patches") takes that phrase's place; one that opens
  with another preposition or a participle ("in pregnancy", "compared with bupropion") is
  added to the earlier question; an X that is an attribute rather than a subject ("the side
  effects") is asked about the earlier subject instead: "What about the side effects,
  regarding varenicline?";
- a question with no words of its own ("Why?", "How long?"), or whose every noun phrase
  follows "the" and shares no word with the earlier subject ("What are the side effects?":
  things already talked about), is asked about the earlier subject: "How long, regarding
  varenicline?".

Anything else is returned as asked. A noun phrase here is a run of words that are not
function words, question words, common verbs or predicate adjectives, cut before a trailing
participle ("varenicline dosed" -> varenicline); a capitalised name mid-sentence stays whole
("NHS Stop Smoking Services"), a word right after "how" is not one ("how well"), nor a verb
between "who"/"what" and a phrase ("who won the ..."). The subject of "what/which N AUX S"
is S ("what strengths do nicotine patches come in?"). A heuristic, not a parser: a hosted
generator, when one is configured, condenses with the model instead (``condense`` in the
generators; ``prompts.condense``), and ``Engine.ask`` answers a follow-up as asked when its
rewrite is refused and the question as asked is not.

Questions with several parts are ``parts.py``'s.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from citewise.records import Turn
from citewise.sentences import STOP_WORDS

MAX_TURNS = 20  # turns of history a request may carry
MAX_TURN_CHARS = 4000  # characters of one turn
EARLIER_QUESTIONS = 6  # the user's latest questions read to resolve a follow-up

QUESTION_WORDS = frozenset("what how why when where who whom which whose".split())
AUXILIARIES = frozenset(
    "is are was were be been being am do does did can could should would will shall may "
    "might must has have had".split())
# verbs that questions wrap around their subject ("does X cause Y", "can I use X")
VERBS = frozenset(
    """use using used take taking taken get getting make making say says said tell know mean
    means want need needs try give help helps cause causes work works happen happens last lasts
    compare affect affects recommend recommends advise advises stop stops start starts come
    comes go goes""".split())
# words that say something about the subject rather than name one
PREDICATES = frozenset(
    """safe safer harmful effective dangerous addictive common better worse possible ok okay
    bad good allowed available necessary normal likely pregnant expensive legal long soon often
    far quickly fast really usually typically exactly else there true""".split())
SINGULAR_PRONOUNS = frozenset("it its this that".split())
PLURAL_PRONOUNS = frozenset("they them their theirs these those".split())
DEMONSTRATIVES = frozenset("this that these those".split())
POSSESSIVES = frozenset("its their".split())
LEADS = frozenset("of about on for".split())  # the phrase after one of these is the subject
DETERMINERS = frozenset("the a an any some its their".split())
PREPOSITIONS = frozenset("in on at for with without after before during about from to than by".split())
PARALLEL = frozenset("the with without about for".split())  # "and with X?": in place of "with Y"
# what a question asks of a subject rather than a subject: "what about the side effects?"
ATTRIBUTES = frozenset(
    """effect effects dose doses dosing risk risks benefit benefits cost costs price evidence
    symptoms safety interactions contraindications timing duration strength strengths""".split())

_TOKEN = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9'’.\-]*[A-Za-z0-9])?")
_ABOUT = re.compile(r"^(?:(?:and|also|so|but)\s+)?(?:what|how)\s+about\s+(?P<x>.+?)[\s?.!]*$", re.I)
_AND = re.compile(r"^(?:and|also)\s+(?:(?:for|with|in|on)\s+)?(?P<x>.+?)[\s?.!]*$", re.I)



def _tokens(text: str) -> list[re.Match[str]]:
    return list(_TOKEN.finditer(text))


def _function(word: str) -> bool:
    w = word.lower()
    return (w in STOP_WORDS or w in QUESTION_WORDS or w in AUXILIARIES or w in VERBS
            or w in PREDICATES)


def _plural(phrase: str) -> bool:
    last = phrase.split()[-1].lower()
    return last.endswith("s") and not last.endswith(("ss", "us", "is"))


def _kept(tokens: list[re.Match[str]], i: int) -> bool:
    """Whether token ``i`` can be part of a noun phrase (module docstring)."""
    word, low = tokens[i].group(), _word(tokens[i])
    before = _word(tokens[i - 1]) if i else ""
    after = _word(tokens[i + 1]) if i + 1 < len(tokens) else ""
    if i and word[:1].isupper() and not word.isupper() or (i and word.isupper() and len(word) > 1):
        return True  # a name mid-sentence ("NHS Stop Smoking Services"), whatever its words
    if _function(word) or low in SINGULAR_PRONOUNS | PLURAL_PRONOUNS:
        return False
    if before == "how":  # "how well", "how effective": how it is, not what
        return False
    # "who won the ...", "what happened in ...": a verb between a question word and a phrase
    return not (before in ("who", "what") and (after in DETERMINERS or after in PREPOSITIONS))


def phrases(question: str) -> tuple[list[str], str | None]:
    """The noun phrases of a question in order, and its subject (module docstring)."""
    tokens = _tokens(question)
    runs: list[tuple[str, str]] = []  # (phrase, the word before it)
    current: list[str] = []
    before = ""
    for i, m in enumerate(tokens):
        if not _kept(tokens, i):
            if current:
                runs.append((" ".join(current), before))
                current = []
            continue
        if not current:
            before = _word(tokens[i - 1]) if i else ""
        owner = m.group().replace("’", "'")
        following = i + 1 < len(tokens) and _kept(tokens, i + 1)
        if owner.endswith(("'s", "s'")) and following:  # "varenicline's side effects": two
            current.append(owner[:-2] if owner.endswith("'s") else owner[:-1])
            runs.append((" ".join(current), "of"))  # the owner, as in "side effects of X"
            current = []
        else:
            current.append(m.group())
    if current:
        runs.append((" ".join(current), before))
    found: list[tuple[str, str]] = []
    for phrase, lead in runs:
        words = phrase.split()
        while len(words) > 1 and words[-1].lower().endswith("ed") and len(words[-1]) > 4:
            words.pop()  # "varenicline dosed": a participle, not part of the name
        if any(not w.replace(".", "").isdigit() for w in words):
            found.append((" ".join(words), lead))
    names = [p for p, _ in found]
    # "what strengths do nicotine patches come in?": what is asked of the phrase after the
    # auxiliary, which is the subject
    asked_of = bool(found) and found[0][1] in ("what", "which")
    subject = next((p for p, lead in found if lead in LEADS),
                   next((p for p, lead in found[1:] if asked_of and lead in AUXILIARIES),
                        names[0] if names else None))
    return names, subject


def _referent(pronoun: str, names: list[str], subject: str) -> str | None:
    """What ``pronoun`` stands for; None when nothing earlier agrees with it in number ("it"
    after "withdrawal symptoms"): a rewrite would be nonsense."""
    if pronoun in PLURAL_PRONOUNS:
        return next((n for n in names if _plural(n)), subject)
    if not _plural(subject):
        return subject
    return next((n for n in names if not _plural(n)), None)


def _possessive(phrase: str) -> str:
    return phrase + ("'" if phrase.endswith("s") else "'s")


def _word(m: re.Match[str]) -> str:
    """A token lower-cased, with a contracted "is" dropped ("it's" -> "it")."""
    return m.group().lower().replace("’", "'").removesuffix("'s")


def _is_pronoun(tokens: list[re.Match[str]], i: int) -> bool:
    word = _word(tokens[i])
    after = [_word(m) for m in tokens[i + 1:i + 4]]
    if word == "it":
        # "is it safe to ...", "it is possible that ...": an "it" that stands for nothing
        rest = after[1:] if after and after[0] in ("is", "was") else after
        return not (len(rest) >= 2 and rest[0] in PREDICATES and rest[1] in ("to", "that", "if"))
    if word not in DEMONSTRATIVES:
        return word in SINGULAR_PRONOUNS | PLURAL_PRONOUNS
    # "this"/"that" name something on their own at the end, before a verb ("does that
    # work"), or right after a leading auxiliary ("is that safe"); before a noun they are
    # determiners ("that trial"), left as they are
    nxt = after[0] if after else ""
    if not nxt or nxt in AUXILIARIES or nxt in VERBS:
        return True
    return i == 1 and _word(tokens[0]) in AUXILIARIES and _function(nxt)


def _named(tokens: list[re.Match[str]], i: int, names: list[str]) -> str | None:
    """The earlier phrase that "that trial" points to ("the EAGLES trial"), if one ends so."""
    if _word(tokens[i]) not in DEMONSTRATIVES or i + 1 == len(tokens):
        return None
    noun = _word(tokens[i + 1])
    return next((n for n in names if n.lower().split()[-1] == noun and n.lower() != noun), None)


def _replace_pronouns(question: str, names: list[str], subject: str,
                      capitalize: bool = True) -> str:
    tokens = _tokens(question)
    out, at, skip = [], 0, -1
    for i, m in enumerate(tokens):
        word = _word(m)
        if i <= skip:
            continue
        end = m.start() + len(word)  # "it's": the "'s" stays
        named = _named(tokens, i, names)
        if named:
            phrase, end, skip = named, tokens[i + 1].end(), i + 1
        elif _is_pronoun(tokens, i):
            referent = _referent(word, names, subject)
            if referent is None:
                return question
            phrase = _possessive(referent) if word in POSSESSIVES else referent
        else:
            continue
        if m.start() == 0 and capitalize:
            phrase = phrase[:1].upper() + phrase[1:]
        out.append(question[at:m.start()])
        out.append(phrase)
        at = end
    return "".join(out) + question[at:] if out else question


def _short_phrase(text: str) -> bool:
    """A few words without a question word or a verb: "bupropion", "the nicotine patch"."""
    words = [_word(m) for m in _tokens(text)]
    return 0 < len(words) <= 5 and not any(
        w in QUESTION_WORDS or w in AUXILIARIES or w in VERBS for w in words)


def _body(question: str) -> str:
    return question.rstrip(" ?.!")


def _resolve(question: str, earlier: str | None, ellipsis: bool = True) -> str:
    """``question`` made standalone from the one earlier question (itself standalone); with
    ``ellipsis`` False only its pronouns are resolved."""
    if not earlier:
        return question
    names, subject = phrases(earlier)
    if subject is None:
        return question
    if not ellipsis:
        return _replace_pronouns(question, names, subject)
    about = _ABOUT.match(question)
    tail = _AND.match(question)
    if tail and not _short_phrase(tail["x"]):
        tail = None  # "and how is it dosed?" is a question of its own
    hit = about or tail
    if hit:
        return _ellipsis(hit["x"], earlier, names, subject)
    resolved = _replace_pronouns(question, names, subject)
    if resolved != question:
        return resolved
    own = phrases(question)[0]
    if not own or (_definite_only(question) and not _shares(question, subject)):
        return f"{_body(question)}, regarding {subject}?"
    return question


def _parallel(x: str, earlier: str) -> str | None:
    """The earlier question with its phrase that opens as ``x`` does ("the heart", "with
    nicotine patches") replaced by ``x`` ("the lungs", "with bupropion"); None if it has none."""
    lead = _word(_tokens(x)[0])
    tokens = _tokens(earlier)
    for i, m in enumerate(tokens):
        if _word(m) != lead or i + 1 == len(tokens):
            continue
        j = i + 1
        while j < len(tokens) and (_word(tokens[j]) in DETERMINERS or _kept(tokens, j)):
            j += 1
        if j > i + 1:
            return earlier[:m.start()] + x + earlier[tokens[j - 1].end():]
    return None


def _ellipsis(x: str, earlier: str, names: list[str], subject: str) -> str:
    """A follow-up that names only ``x`` ("What about the lungs?", "And with bupropion?")
    asked as the earlier question: ``x`` in the place of the earlier phrase that opens as it
    does, else of the subject; a phrase that opens with a preposition or a participle is
    added to the earlier question; what it asks of the subject ("the side effects"), about
    the earlier subject."""
    tokens = _tokens(x)
    if any(_is_pronoun(tokens, i) for i in range(len(tokens))):
        return f"What about {_replace_pronouns(x, names, subject, capitalize=False)}?"
    first = _word(tokens[0]) if tokens else ""
    if first in PARALLEL:
        parallel = _parallel(x, earlier)
        if parallel is not None:
            return parallel
    if first in PREPOSITIONS or first.endswith(("ed", "ing")):
        return f"{_body(earlier)} {x}?"
    head = _word(tokens[-1]) if tokens else ""
    if head not in ATTRIBUTES and subject in earlier:
        return earlier.replace(subject, x, 1)
    return f"What about {x}, regarding {subject}?"


def _definite_only(question: str) -> bool:
    """Whether every noun phrase of the question follows "the" ("what are the side effects"):
    in a follow-up, things already talked about."""
    tokens = _tokens(question)
    leads = [_word(tokens[i - 1]) if i else "" for i, m in enumerate(tokens)
             if not _function(m.group()) and _word(m) not in SINGULAR_PRONOUNS | PLURAL_PRONOUNS
             and (i == 0 or _function(tokens[i - 1].group()))]
    return bool(leads) and all(lead == "the" for lead in leads)


def _shares(question: str, subject: str) -> bool:
    return bool({_word(m) for m in _tokens(question)} & {_word(m) for m in _tokens(subject)})


def standalone(question: str, earlier: Sequence[str], ellipsis: bool = True) -> str:
    """``question`` made standalone from the user's earlier questions, oldest first (each
    resolved against those before it, so a chain of follow-ups keeps its subject). With
    ``ellipsis`` False only pronouns are resolved (the parts of one question)."""
    last: str | None = None
    for asked in list(earlier)[-EARLIER_QUESTIONS:]:
        asked = _resolve(" ".join(asked.split()), last, ellipsis)
        if phrases(asked)[1] is not None:
            last = asked
    return _resolve(question, last, ellipsis)


def user_questions(history: Sequence[Turn]) -> list[str]:
    return [t.content for t in history if t.role == "user" and t.content.strip()]


def has_content(text: str) -> bool:
    """Whether ``text`` has a word that is not a function word, question word or verb."""
    return any(not _function(m.group()) for m in _tokens(text))
