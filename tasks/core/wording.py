"""Words that depend on the day: relative dates and counted days, in each locale.

Pure and table-driven: one entry per locale, each with its plural forms. English and
Spanish both use "one" for exactly 1 and "other" for everything else (CLDR), so a count
needs two forms; a locale with more forms would add them here.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date


@dataclass(frozen=True)
class _Words:
    today: str
    tomorrow: str
    yesterday: str
    in_days: str  # {n} days from now (n >= 2)
    days_ago: str  # {n} days before now (n >= 2)
    day_one: str  # "1 day"
    day_other: str  # "{n} days"


_WORDS: dict[str, _Words] = {
    "en": _Words(today="today", tomorrow="tomorrow", yesterday="yesterday",
                 in_days="in {n} days", days_ago="{n} days ago",
                 day_one="1 day", day_other="{n} days"),
    "es": _Words(today="hoy", tomorrow="mañana", yesterday="ayer",
                 in_days="dentro de {n} días", days_ago="hace {n} días",
                 day_one="1 día", day_other="{n} días"),
}
_MONTHS = {
    "en": ("January", "February", "March", "April", "May", "June", "July", "August",
           "September", "October", "November", "December"),
    "es": ("enero", "febrero", "marzo", "abril", "mayo", "junio", "julio", "agosto",
           "septiembre", "octubre", "noviembre", "diciembre"),
}


def _words(locale: str) -> _Words:
    try:
        return _WORDS[locale]
    except KeyError:
        raise ValueError(f"no wording for locale {locale!r}") from None


def count_days(n: int, locale: str) -> str:
    """'1 day', '3 days'; '1 día', '3 días'."""
    words = _words(locale)
    return words.day_one if abs(n) == 1 else words.day_other.format(n=abs(n))


def relative_day(days: int, locale: str) -> str:
    """A day `days` from now, as a reader says it: today, tomorrow, in 5 days, yesterday,
    5 days ago (hoy, mañana, dentro de 5 días, ayer, hace 5 días)."""
    words = _words(locale)
    if days == 0:
        return words.today
    if days == 1:
        return words.tomorrow
    if days == -1:
        return words.yesterday
    return (words.in_days if days > 0 else words.days_ago).format(n=abs(days))


def long_date(day: date | None, locale: str) -> str:
    """One date style for every email: '1 March 2027', '1 de marzo de 2027' (CLDR's long
    format for en_GB and es, as Babel writes them; written out here because it runs for
    every date of every email). '—' for an unknown date."""
    if day is None:
        return "—"
    month = _MONTHS[locale][day.month - 1] if locale in _MONTHS else _MONTHS["en"][day.month - 1]
    return f"{day.day} de {month} de {day.year}" if locale == "es" else f"{day.day} {month} {day.year}"
