"""What a drafted paragraph may say (G7), pure: it sets a tone and says nothing else.

The rule is an allow-list, not a list of what is forbidden: a paragraph is accepted only
when every word of every sentence is in the bounded tone vocabulary of its locale
(core.tone_words), or in one of its fixed phrases, and its sentences have the shape of
prose (a capital letter first, punctuation attached to a word, a bounded count and
length). The vocabulary holds no number, time, money, payment state, correction,
destination, contact, threat, promise, third party or negation, so a paragraph cannot
carry one whatever its spelling: "acme-payments dot ru", "s e t t l e d" and
"we owe you a refund" each hold a word that is not in the list.

The text is judged as a mail client would show it, after `normalise`: control and format
characters (zero-width, bidi, soft hyphen, tags) refuse the paragraph, NFKC folds
full-width and mathematical letters, look-alike letters of other scripts are mapped to
the Latin letters they imitate (Unicode's confusables, through `confusable_homoglyphs`),
and whitespace is collapsed. What is accepted is the normalised text, and that is what
is stored and sent.

A false refusal costs the template paragraph; a false acceptance can cost the client's
money: the rule errs on the side of refusing.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from enum import StrEnum
from functools import cache

from dueflow.tasks.core.tone_words import (
    CATEGORIES,
    PAYING,
    PHRASES,
    QUANTITY,
    STEP_PHRASES,
    THANKS,
    VOCABULARY,
)

MIN_CHARS, MAX_CHARS = 30, 700
MAX_SENTENCES = 5
MIN_WORDS, MAX_WORDS = 3, 35  # per sentence
MAX_SINGLE_LETTERS = 2  # in a row: "p a y" is spelling, not prose

_LETTERS = "abcdefghijklmnopqrstuvwxyzáéíóúüñ"
_PUNCTUATION = ".,;:!?¿¡'-"
ALLOWED = frozenset(_LETTERS + _LETTERS.upper() + _PUNCTUATION + " ")
# Typographic variants a model writes for the same mark.
_TYPOGRAPHY = str.maketrans({"’": "'", "‘": "'", "ʼ": "'", "‐": "-", "‑": "-", "–": "-", "—": "-"})


class Rule(StrEnum):
    """Why a paragraph is refused; branch on this, never on the note's text."""

    CONTROL = "control or format character"
    COMBINING = "combining mark"
    DIGIT = "digit"
    CHARACTER = "character outside the tone alphabet"
    TOO_SHORT = "too short"
    TOO_LONG = "too long"
    SENTENCES = "too many sentences"
    SHAPE = "not a prose sentence"
    SPELLED_OUT = "spelled-out letters"
    NUMBER = "number word"
    TIME = "date, day or deadline word"
    MONEY = "amount or money word"
    PAYMENT_STATE = "payment state word"
    CORRECTION = "correction word"
    DESTINATION = "destination or contact word"
    THREAT = "consequence or threat word"
    PROMISE = "promise word"
    THIRD_PARTY = "third party word"
    NEGATION = "negation"
    WORD = "word outside the tone vocabulary"
    PAYMENT_QUANTITY = "a quantity or time word in a sentence about paying"
    PAYMENT_THANKS = "thanks in a sentence about paying"


_CATEGORY_RULES = {
    "number": Rule.NUMBER, "time": Rule.TIME, "money": Rule.MONEY,
    "payment_state": Rule.PAYMENT_STATE, "correction": Rule.CORRECTION,
    "destination": Rule.DESTINATION, "threat": Rule.THREAT, "promise": Rule.PROMISE,
    "third_party": Rule.THIRD_PARTY, "negation": Rule.NEGATION,
}


@dataclass(frozen=True)
class Refusal:
    rule: Rule
    detail: str = ""

    def __str__(self) -> str:
        return f"{self.rule.value} ({self.detail})" if self.detail else self.rule.value


@dataclass(frozen=True)
class Verdict:
    """`text` is the normalised paragraph: the text to store and send when accepted."""

    text: str
    refusal: Refusal | None

    @property
    def accepted(self) -> bool:
        return self.refusal is None


def _shown(char: str) -> str:
    return f"U+{ord(char):04X} {unicodedata.name(char, 'unnamed')}"


@cache
def _latin(char: str) -> str:
    """The allowed text a look-alike character imitates, or the character itself."""
    # Imported here: its table takes 110 ms to load, which a night without drafted
    # reminders (no LLM) never needs.
    from confusable_homoglyphs import confusables

    found = confusables.is_confusable(char, greedy=True, preferred_aliases=[])
    for entry in found or ():
        for glyph in entry["homoglyphs"]:
            if glyph["c"] and all(c in ALLOWED for c in glyph["c"]):
                return glyph["c"]
    return char


def normalise(text: str) -> tuple[str, Refusal | None]:
    """The paragraph as a mail client shows it, or why it cannot be judged at all.

    Invisible characters are refused rather than removed: a model that writes them is
    hiding something, and removing them could join what they separate.
    """
    spaced = "".join(" " if c.isspace() else c for c in str(text))
    for char in spaced:
        if unicodedata.category(char)[0] == "C":  # Cc Cf Cs Co Cn: control, format, unassigned
            return spaced, Refusal(Rule.CONTROL, _shown(char))
    folded = unicodedata.normalize("NFKC", spaced).translate(_TYPOGRAPHY)
    for char in folded:
        if unicodedata.category(char)[0] == "M":  # left over when NFKC cannot compose it
            return folded, Refusal(Rule.COMBINING, _shown(char))
        if unicodedata.category(char)[0] == "C":  # NFKC can make some (rare, but refuse)
            return folded, Refusal(Rule.CONTROL, _shown(char))
    # Only what is not ASCII is mapped: the confusables table would also turn the digit 1
    # into the letter l, and a digit must be refused as a digit.
    mapped = "".join(c if c.isascii() or c.isdigit() else _latin(c) for c in folded)
    # NFKC again: a mapped letter next to an accent could now compose differently.
    return " ".join(unicodedata.normalize("NFKC", mapped).split()), None


_WORD = re.compile(rf"[{_LETTERS}]+(?:['-][{_LETTERS}]+)*")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
# A sentence: optional opening mark, words separated by a space or by , ; : attached to
# the word before, and one closing mark. Anything else ("evil.example", "pay . us",
# "-> here") is not the shape of prose.
_SENTENCE = re.compile(
    rf"[¿¡]?[{_LETTERS.upper()}][{_LETTERS}'-]*(?:[,;:]?\s[¿¡]?[{_LETTERS}{_LETTERS.upper()}]"
    rf"[{_LETTERS}{_LETTERS.upper()}'-]*)*[.!?]+",
)


def _phrase_spans(words: list[str], locale: str, step: str | None) -> set[int]:
    """Indexes of the words that belong to an allowed fixed phrase."""
    covered: set[int] = set()
    for phrase in (*PHRASES[locale], *STEP_PHRASES.get(step or "", {}).get(locale, ())):
        size = len(phrase)
        for start in range(len(words) - size + 1):
            if tuple(words[start:start + size]) == phrase:
                covered.update(range(start, start + size))
    return covered


def _word_refusal(word: str, locale: str) -> Refusal:
    for name, members in CATEGORIES[locale].items():
        if word in members or any(part in members for part in word.split("-")):
            return Refusal(_CATEGORY_RULES[name], repr(word))
    return Refusal(Rule.WORD, repr(word[:40]))


def _known(word: str, vocabulary: frozenset[str]) -> bool:
    # A compound passes when it is listed whole or when each of its parts is listed.
    return word in vocabulary or ("-" in word and all(p in vocabulary for p in word.split("-")))


def judge(text: str, locale: str, step: str | None = None) -> Verdict:
    """Accept the paragraph for `locale` ("en" or "es") and reminder `step`, or say why not."""
    if locale not in VOCABULARY:
        raise ValueError(f"no tone vocabulary for locale {locale!r}; use one of {sorted(VOCABULARY)}")
    shown, refusal = normalise(text)
    if refusal:
        return Verdict(shown, refusal)
    for char in shown:
        if char.isdigit():
            return Verdict(shown, Refusal(Rule.DIGIT, repr(char)))
        if char not in ALLOWED:
            return Verdict(shown, Refusal(Rule.CHARACTER, _shown(char)))
    if len(shown) < MIN_CHARS:
        return Verdict(shown, Refusal(Rule.TOO_SHORT, f"{len(shown)} characters, minimum {MIN_CHARS}"))
    if len(shown) > MAX_CHARS:
        return Verdict(shown, Refusal(Rule.TOO_LONG, f"{len(shown)} characters, maximum {MAX_CHARS}"))
    sentences = _SENTENCE_END.split(shown)
    if len(sentences) > MAX_SENTENCES:
        return Verdict(shown, Refusal(Rule.SENTENCES, f"{len(sentences)}, maximum {MAX_SENTENCES}"))
    vocabulary = VOCABULARY[locale]
    for sentence in sentences:
        if not _SENTENCE.fullmatch(sentence):
            return Verdict(shown, Refusal(Rule.SHAPE, repr(sentence[:40])))
        words = _WORD.findall(sentence.lower())
        if not MIN_WORDS <= len(words) <= MAX_WORDS:
            return Verdict(shown, Refusal(Rule.SHAPE, f"{len(words)} words, {MIN_WORDS} to {MAX_WORDS}"))
        run = 0
        for word in words:
            run = run + 1 if len(word) == 1 else 0
            if run > MAX_SINGLE_LETTERS:
                return Verdict(shown, Refusal(Rule.SPELLED_OUT, repr(sentence[:40])))
        phrased = _phrase_spans(words, locale, step)
        for index, word in enumerate(words):
            if index not in phrased and not _known(word, vocabulary):
                return Verdict(shown, _word_refusal(word, locale))
        free = [word for index, word in enumerate(words) if index not in phrased]
        if PAYING[locale] & set(words):
            if found := next((w for w in free if w in QUANTITY[locale]), None):
                return Verdict(shown, Refusal(Rule.PAYMENT_QUANTITY, repr(found)))
            if found := next((w for w in free if w in THANKS[locale]), None):
                return Verdict(shown, Refusal(Rule.PAYMENT_THANKS, repr(found)))
    return Verdict(shown, None)
