"""The locales dueflow writes in (a contract fact), read from data: a locale is the set of
its files among the packaged templates — `words.LOCALE.toml` (its name, how it writes
dates, the days an email counts, the names of an invoice's steps), its templates and its
phrasebook (`phrasebook.LOCALE.toml`). Adding one adds files and no code; a locale with a
missing template or sentence is refused at start-up (`render.check_templates`,
`phrasebook`). Any other locale a client has is written in English."""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass
from importlib.resources import files
from typing import TYPE_CHECKING, Literal

from dueflow.tasks.core.statuses import LedgerStatus

DEFAULT_LOCALE = "en"


@dataclass(frozen=True)
class Words:
    """What a locale writes besides its templates (words.LOCALE.toml)."""

    code: str
    name: str  # the language's English name
    date_locale: str  # the CLDR locale of its long dates (Babel)
    today: str
    tomorrow: str
    yesterday: str
    in_days: str  # "{n}" days from now, n >= 2
    days_ago: str  # "{n}" days before now, n >= 2
    day_one: str  # "1 day"
    day_other: str  # "{n} days"
    steps: dict[str, str]  # an invoice's step, as a history lists it
    outcomes: dict[str, str]  # a ledger status, as a history says it


def _read(code: str, text: str) -> Words:
    # Every step's name is checked by the unit tests (test_wording), not here: the flow's
    # module reads this one, and the steps' enum lives beside the pandas key builders.
    data = tomllib.loads(text)
    days, steps, outcomes = data["days"], data["steps"], data["outcomes"]
    missing = {*LedgerStatus} - outcomes.keys()
    if missing:
        raise ValueError(f"words.{code}.toml lacks {', '.join(sorted(missing))}")
    return Words(code=code, name=data["name"], date_locale=data["date_locale"],
                 today=days["today"], tomorrow=days["tomorrow"], yesterday=days["yesterday"],
                 in_days=days["in_days"], days_ago=days["days_ago"], day_one=days["day_one"],
                 day_other=days["day_other"], steps=dict(steps), outcomes=dict(outcomes))


def _packaged() -> dict[str, Words]:
    """Every locale the packaged templates hold, English first."""
    folder = files("dueflow.tasks") / "templates"
    found = {}
    for entry in folder.iterdir():
        parts = entry.name.split(".")
        if len(parts) == 3 and parts[0] == "words" and parts[2] == "toml":
            found[parts[1]] = _read(parts[1], entry.read_text(encoding="utf-8"))
    return dict(sorted(found.items(), key=lambda item: (item[0] != DEFAULT_LOCALE, item[0])))


WORDS: dict[str, Words] = _packaged()
SUPPORTED_LOCALES: tuple[str, ...] = tuple(WORDS)
LANGUAGES: dict[str, str] = {code: words.name for code, words in WORDS.items()}
assert DEFAULT_LOCALE in WORDS, "the packaged templates lack words.en.toml"

# The flow's `renewal_locale` parameter: the run form offers exactly these. Built from the
# data at import (the checker sees a plain string: it cannot read the folder).
if TYPE_CHECKING:
    Locale = str
else:
    Locale = Literal[SUPPORTED_LOCALES]


def supported_locale(value: str | None) -> str:
    """The locale to write in for a client's `locale` value."""
    locale = (value or "").strip().lower()
    return locale if locale in WORDS else DEFAULT_LOCALE


def words(locale: str) -> Words:
    try:
        return WORDS[locale]
    except KeyError:
        raise ValueError(f"no wording for locale {locale!r};"
                         f" use one of {', '.join(SUPPORTED_LOCALES)}") from None


_LANGUAGE = re.compile(r"([A-Za-z]{2,3})(?:[-_]([A-Za-z]{2}|[0-9]{3}))?")


def parse_language(text: str | None, default: str, name: str) -> str:
    """A language setting (`es`, `de`, `en_GB`, `pt-BR`) as CLDR writes it (`pt_BR`), checked
    against Babel's data: a ValueError line naming the setting and the fix otherwise. Unset
    is `default`; the process's locale is never read."""
    raw = (text or "").strip()
    if not raw:
        return default
    from babel import Locale, UnknownLocaleError

    match = _LANGUAGE.fullmatch(raw)
    code = match and match.group(1).lower() + (f"_{match.group(2).upper()}" if match.group(2) else "")
    try:
        if not code:
            raise ValueError
        Locale.parse(code)
    except (ValueError, UnknownLocaleError):
        raise ValueError(f"{name}={raw[:40]!r} is not a language: write a code such as en, es or de,"
                         " or one with a country such as en_GB") from None
    return code
