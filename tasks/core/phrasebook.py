"""The phrasebook (G7), pure: the reviewed sentences a reminder's paragraph is made of.

A reminder's paragraph is one to three sentences of its locale's phrasebook, in slot order
(an opening, one body sentence of the reminder's tone, a closing). A model, or without
one dueflow's rule (core.tone), only chooses which: no word a model writes reaches an
email. The sentences are data — `templates/phrasebook.LOCALE.toml`, read by a person (the
rules are in each file's header) — and a company may extend or replace them with its own
(DUEFLOW_PHRASEBOOK_FILE or a DueflowPhrasebook block), checked here before anything is
written and listed for review by `dueflow check --phrasebook`.

`sentence_problem` is a lint, not a guard: it refuses what cannot be rendered as written
(placeholders, markup, links, digits, invisible or look-alike characters, more than one
sentence). What a sentence means is a person's review; what reaches an email is only ever
text that passed both.
"""

from __future__ import annotations

import re
import tomllib
import unicodedata
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from enum import StrEnum
from functools import cache, lru_cache
from importlib.resources import files
from typing import Any

from dueflow.tasks.core.keys import CLIENT_STEPS
from dueflow.tasks.core.locales import SUPPORTED_LOCALES

DRAFTED_STEPS: tuple[str, ...] = tuple(step.value for step in CLIENT_STEPS)  # OVERDUE goes to a person


class Tone(StrEnum):
    """How a reminder reads: what a model (or the rule) chooses for it."""

    WARM = "warm"
    APPRECIATIVE = "appreciative"
    NEUTRAL = "neutral"
    FIRM = "firm"
    PRESSING = "pressing"  # pressing, and courteous


class Slot(StrEnum):
    """Where a sentence stands in the paragraph; the paragraph is written in this order."""

    OPENING = "opening"
    BODY = "body"
    CLOSING = "closing"


SLOT_ORDER = {slot: rank for rank, slot in enumerate(Slot)}  # a paragraph's order, looked up once


class Relationship(StrEnum):
    """A client as dueflow reads its payment history (core.tone.relationships): which
    openings are true of it."""

    NEW = "new"
    LONG_STANDING = "long_standing"
    PUNCTUAL = "punctual"
    LATELY_LATE = "lately_late"
    OFTEN_LATE = "often_late"


# The tones each reminder may take: a second reminder is never warmer than neutral.
STEP_TONES: dict[str, tuple[Tone, ...]] = {
    "REMINDED_1": (Tone.WARM, Tone.APPRECIATIVE, Tone.NEUTRAL, Tone.FIRM),
    "REMINDED_2": (Tone.NEUTRAL, Tone.FIRM, Tone.PRESSING),
}
# Before its due date (or without one) an invoice is not pressed: the step's firmest tone is left out.
NOT_BEFORE_DUE: dict[str, Tone] = {"REMINDED_1": Tone.FIRM, "REMINDED_2": Tone.PRESSING}
assert set(STEP_TONES) == set(DRAFTED_STEPS) == set(NOT_BEFORE_DUE)


def tones_for(step: str, not_yet_due: bool) -> tuple[Tone, ...]:
    """The tones a reminder of `step` may take."""
    tones = STEP_TONES[step]
    return tuple(t for t in tones if t != NOT_BEFORE_DUE[step]) if not_yet_due else tones


class PhrasebookError(ValueError):
    """A phrasebook cannot be used; the message is one line naming where and the fix."""


@dataclass(frozen=True)
class Sentence:
    id: str
    locale: str
    slot: Slot
    text: str
    tones: frozenset[Tone] = frozenset(Tone)
    steps: frozenset[str] = frozenset(DRAFTED_STEPS)
    fits: frozenset[Relationship] = frozenset(Relationship)  # openings: the clients it is true of
    origin: str = "dueflow"

    def suits(self, step: str, relationship: Relationship) -> bool:
        """May stand in a reminder of `step` to a client read as `relationship`."""
        return step in self.steps and (self.slot != Slot.OPENING or relationship in self.fits)


# --------------------------------------------------------------------------- the lint

MIN_WORDS, MAX_WORDS, MAX_CHARS = 3, 30, 200
ID = re.compile(r"[a-z][a-z0-9_.-]{0,63}")
_MARKS = frozenset(".,;:!?¿¡'’-")
_PLACEHOLDER = frozenset("{}%$<>&[]()/\\@#*_~|=+\"^`")
_LINK = re.compile(r"[^\W\d_]\.[^\W\d_]|\bwww\b|\bhttps?\b", re.IGNORECASE)


def _shown(char: str) -> str:
    return f"U+{ord(char):04X} {unicodedata.name(char, 'unnamed')}"


def sentence_problem(text: str) -> str | None:
    """Why `text` cannot be a phrasebook sentence (None when it can): it must be one plain
    sentence of Latin letters, spaces and `. , ; : ! ? ¿ ¡ ' ’ -`, rendered as written."""
    if not text.strip():
        return "is empty"
    if unicodedata.normalize("NFKC", text) != text:
        return "is not in plain form (NFKC): full-width, styled or composed letters"
    for char in text:
        kind = unicodedata.category(char)
        if char == " " or char in _MARKS:
            continue
        if kind[0] in "CZ":
            return f"holds an invisible, control or unusual space character ({_shown(char)})"
        if kind[0] == "N":
            return f"holds a digit or number ({_shown(char)})"
        if char in _PLACEHOLDER:
            return f"holds {char!r}: a sentence is rendered as written, with no placeholder, markup or link"
        if kind[0] == "M":
            return f"holds a combining mark ({_shown(char)})"
        if kind[0] != "L" or not unicodedata.name(char, "").startswith("LATIN"):
            return f"holds {_shown(char)}: only Latin letters, spaces and . , ; : ! ? ¿ ¡ ' ’ - are written"
    if text != text.strip() or "  " in text:
        return "has leading, trailing or double spaces"
    if _LINK.search(text):
        return "looks like a link or an address"
    first = text.lstrip("¿¡")
    if not first[:1].isupper():
        return "does not start with a capital letter"
    if text[-1] not in ".!?":
        return "does not end with . ! or ?"
    if re.search(r"[.!?]\s", text):
        return "is more than one sentence"
    words = len(text.split())
    if not MIN_WORDS <= words <= MAX_WORDS or len(text) > MAX_CHARS:
        return (f"has {words} words and {len(text)} characters ({MIN_WORDS} to {MAX_WORDS} words,"
                f" at most {MAX_CHARS} characters)")
    return None


# --------------------------------------------------------------------------- reading

_FILE_KEYS = {"mode", "locale", "disabled", "sentence"}
_SENTENCE_KEYS = {"id", "locale", "slot", "text", "tones", "steps", "fits"}


@dataclass(frozen=True)
class PhrasebookFile:
    """What one phrasebook file says: its sentences, whether they extend dueflow's or
    replace them (per locale they cover), and dueflow's sentences it turns off."""

    sentences: tuple[Sentence, ...]
    replace: bool = False
    disabled: frozenset[str] = frozenset()


def _values(raw: Any, allowed: Iterable[str], what: str, where: str) -> frozenset[str]:
    if not isinstance(raw, list) or not raw or not all(isinstance(v, str) for v in raw):
        raise PhrasebookError(f"{where}: {what} must be a list of names, e.g. [\"{next(iter(allowed))}\"]")
    unknown = sorted(set(raw) - set(allowed))
    if unknown:
        raise PhrasebookError(f"{where}: unknown {what} {', '.join(map(repr, unknown))}"
                              f" (use {', '.join(allowed)})")
    return frozenset(raw)


def _sentence(raw: Any, number: int, default_locale: str | None, origin: str) -> Sentence:
    where = f"{origin}: sentence {number}"
    if not isinstance(raw, dict):
        raise PhrasebookError(f"{where}: is not a table ([[sentence]])")
    if isinstance(raw.get("id"), str):
        where = f"{origin}: sentence {raw['id']!r}"
    unknown = sorted(raw.keys() - _SENTENCE_KEYS)
    if unknown:
        raise PhrasebookError(f"{where}: unknown field {unknown[0]!r}"
                              f" (fields: {', '.join(sorted(_SENTENCE_KEYS))})")
    for name in ("id", "slot", "text"):
        if not isinstance(raw.get(name), str):
            raise PhrasebookError(f"{where}: needs {name} = \"…\"")
    if not ID.fullmatch(raw["id"]):
        raise PhrasebookError(f"{where}: the id must be lower-case letters, digits, '.', '_' or '-',"
                              " starting with a letter, at most 64 characters")
    locale = raw.get("locale", default_locale)
    if locale not in SUPPORTED_LOCALES:
        raise PhrasebookError(f"{where}: locale {locale!r} is not one dueflow writes in"
                              f" ({', '.join(SUPPORTED_LOCALES)})")
    slot = _values([raw["slot"]], list(Slot), "slot", where)
    problem = sentence_problem(raw["text"])
    if problem:
        raise PhrasebookError(f"{where}: the text {problem}")
    if "fits" in raw and raw["slot"] != Slot.OPENING:
        raise PhrasebookError(f"{where}: only an opening has fits (the clients it is true of)")
    return Sentence(
        id=raw["id"], locale=locale, slot=Slot(next(iter(slot))), text=raw["text"],
        tones=frozenset(map(Tone, _values(raw["tones"], list(Tone), "tones", where)))
        if "tones" in raw else frozenset(Tone),
        steps=(_values(raw["steps"], DRAFTED_STEPS, "steps", where) if "steps" in raw
               else frozenset(DRAFTED_STEPS)),
        fits=frozenset(map(Relationship, _values(raw["fits"], list(Relationship), "fits", where)))
        if "fits" in raw else frozenset(Relationship),
        origin=origin)


def parse_phrasebook(text: str, origin: str) -> PhrasebookFile:
    """One phrasebook file (TOML), checked: one PhrasebookError line naming the file,
    the sentence and the fix."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise PhrasebookError(f"{origin}: not valid TOML ({exc})") from None
    unknown = sorted(data.keys() - _FILE_KEYS)
    if unknown:
        raise PhrasebookError(f"{origin}: unknown setting {unknown[0]!r}"
                              f" (settings: {', '.join(sorted(_FILE_KEYS))})")
    mode = data.get("mode", "extend")
    if mode not in ("extend", "replace"):
        raise PhrasebookError(f"{origin}: mode = {mode!r}; use \"extend\" (add to dueflow's sentences)"
                              " or \"replace\" (only these, for the locales they cover)")
    raw = data.get("sentence", [])
    if not isinstance(raw, list):
        raise PhrasebookError(f"{origin}: sentences are written [[sentence]]")
    sentences = tuple(_sentence(item, n, data.get("locale"), origin) for n, item in enumerate(raw, 1))
    seen: dict[tuple[str, str], Sentence] = {}
    texts: dict[tuple[str, str], str] = {}
    for sentence in sentences:
        if (sentence.locale, sentence.id) in seen:
            raise PhrasebookError(f"{origin}: sentence {sentence.id!r} ({sentence.locale}) is written twice")
        if (sentence.locale, sentence.text) in texts:
            raise PhrasebookError(f"{origin}: sentences {texts[(sentence.locale, sentence.text)]!r} and"
                                  f" {sentence.id!r} have the same text")
        seen[(sentence.locale, sentence.id)] = sentence
        texts[(sentence.locale, sentence.text)] = sentence.id
    disabled = data.get("disabled", [])
    if not isinstance(disabled, list) or not all(isinstance(d, str) for d in disabled):
        raise PhrasebookError(f"{origin}: disabled must be a list of sentence ids")
    return PhrasebookFile(sentences, mode == "replace", frozenset(disabled))


@cache
def packaged_files() -> tuple[PhrasebookFile, ...]:
    """dueflow's own phrasebooks, one per locale (templates/phrasebook.LOCALE.toml)."""
    folder = files("dueflow.tasks") / "templates"
    found = []
    for locale in SUPPORTED_LOCALES:
        entry = folder / f"phrasebook.{locale}.toml"
        if not entry.is_file():
            raise PhrasebookError(f"dueflow's phrasebook for {locale} is missing"
                                  f" (templates/phrasebook.{locale}.toml)")
        book = parse_phrasebook(entry.read_text(encoding="utf-8"), f"phrasebook.{locale}.toml")
        if {s.locale for s in book.sentences} != {locale}:
            raise PhrasebookError(f"phrasebook.{locale}.toml holds sentences of another locale")
        found.append(replace(book, sentences=tuple(replace(s, origin="dueflow") for s in book.sentences)))
    return tuple(found)


# --------------------------------------------------------------------------- the book


@dataclass(frozen=True)
class Phrasebook:
    """The sentences a night may render, by locale and id."""

    sentences: tuple[Sentence, ...]
    origin: str = "dueflow"  # and the company's file or block, when it has one
    _index: dict[tuple[str, str], Sentence] = field(default_factory=dict, repr=False, compare=False)

    def __post_init__(self) -> None:
        self._index.update({(s.locale, s.id): s for s in self.sentences})

    def get(self, locale: str, sentence_id: str) -> Sentence | None:
        return self._index.get((locale, sentence_id))

    def of(self, locale: str) -> tuple[Sentence, ...]:
        return tuple(s for s in self.sentences if s.locale == locale)

    def menu(self, locale: str, step: str, relationship: Relationship,
             tones: Iterable[Tone]) -> tuple[Sentence, ...]:
        """What may be chosen for one reminder: the locale's sentences for its step, the
        openings true of its client, carrying one of its tones."""
        wanted = set(tones)
        return tuple(s for s in self.of(locale) if s.suits(step, relationship) and s.tones & wanted)

    def text(self, locale: str, ids: Iterable[str]) -> str:
        """The paragraph of a plan: its sentences' texts, as written, in slot order."""
        chosen = [self._index[(locale, i)] for i in ids]
        return " ".join(s.text for s in sorted(chosen, key=lambda s: SLOT_ORDER[s.slot]))

    def sizes(self) -> dict[tuple[str, str, Slot], int]:
        """How many sentences each locale, step and slot offers."""
        return {(locale, step, slot): sum(1 for s in self.of(locale) if step in s.steps and s.slot == slot)
                for locale in SUPPORTED_LOCALES for step in DRAFTED_STEPS for slot in Slot}

    def gaps(self) -> list[str]:
        """What the book leaves out but a night can do without: an opening for a kind of
        client, a closing for a tone (such a paragraph has none)."""
        found = []
        for locale in SUPPORTED_LOCALES:
            mine = self.of(locale)
            for step in DRAFTED_STEPS:
                found += [f"{locale} {step}: no opening for a {r.value} client" for r in Relationship
                          if not any(s.slot == Slot.OPENING and s.suits(step, r) for s in mine)]
                found += [f"{locale} {step}: no closing of tone {t.value}" for t in STEP_TONES[step]
                          if not any(s.slot == Slot.CLOSING and step in s.steps and t in s.tones
                                     for s in mine)]
        return found


def _missing_bodies(sentences: Iterable[Sentence]) -> list[str]:
    have = {(s.locale, step, tone) for s in sentences if s.slot == Slot.BODY
            for step in s.steps for tone in s.tones}
    return [f"{locale} {step} {tone.value}" for locale in SUPPORTED_LOCALES for step in DRAFTED_STEPS
            for tone in STEP_TONES[step] if (locale, step, tone) not in have]


def build_phrasebook(own: PhrasebookFile | None = None, origin: str = "") -> Phrasebook:
    """dueflow's phrasebook, extended or replaced by a company's (`own`, read from
    `origin`), checked: every locale, step and tone has a body sentence (a PhrasebookError
    line naming what is missing otherwise), and `disabled` names sentences that exist."""
    ours = [s for book in packaged_files() for s in book.sentences]
    if own is None:
        sentences = ours
    else:
        theirs = {(s.locale, s.id) for s in own.sentences}
        replaced = {s.locale for s in own.sentences} if own.replace else set()
        unknown = sorted(own.disabled - {s.id for s in ours})
        if unknown:
            raise PhrasebookError(f"{origin}: disabled names {unknown[0]!r}, which is not one of dueflow's"
                                  " sentences (`dueflow check --phrasebook` lists them)")
        kept = [s for s in ours if s.locale not in replaced and s.id not in own.disabled
                and (s.locale, s.id) not in theirs]  # a sentence of the company's own id rewords ours
        sentences = kept + list(own.sentences)
    missing = _missing_bodies(sentences)
    if missing:
        where = origin or "dueflow's phrasebook"
        raise PhrasebookError(f"{where}: no body sentence for {'; '.join(missing[:4])}"
                              f"{f' and {len(missing) - 4} more' if len(missing) > 4 else ''}"
                              " (every locale, step and tone needs one:"
                              " add [[sentence]] with slot = \"body\")")
    return Phrasebook(tuple(sentences), "dueflow" + (f" and {origin}" if origin else ""))


@cache
def default_phrasebook() -> Phrasebook:
    return build_phrasebook()


@lru_cache(maxsize=16)  # settings ask again at each stage of a night: read a text once
def load_phrasebook(text: str | None, origin: str) -> Phrasebook:
    """The night's phrasebook: dueflow's, with a company's own file or block text."""
    if text is None:
        return default_phrasebook()
    return build_phrasebook(parse_phrasebook(text, origin), origin)


def listing(book: Phrasebook) -> Mapping[str, list[Sentence]]:
    """Every sentence for review, by locale, in slot order (what `check --phrasebook` prints)."""
    return {locale: sorted(book.of(locale), key=lambda s: (SLOT_ORDER[s.slot], s.id))
            for locale in SUPPORTED_LOCALES}
