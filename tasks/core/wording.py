"""Words that depend on the day: relative dates, counted days and long dates, in each
locale (`core.locales`: each locale's words file).

English, Spanish and German all use "one" for exactly 1 and "other" for everything else
(CLDR), so a count needs two forms; a locale with more forms would add them to its file.
"""

from __future__ import annotations

from datetime import date
from functools import lru_cache

from dueflow.tasks.core.locales import words


def count_days(n: int, locale: str) -> str:
    """'1 day', '3 days'; '1 día', '3 días'."""
    said = words(locale)
    return said.day_one if abs(n) == 1 else said.day_other.format(n=abs(n))


def relative_day(days: int, locale: str) -> str:
    """A day `days` from now, as a reader says it: today, tomorrow, in 5 days, yesterday,
    5 days ago (hoy, mañana, dentro de 5 días, ayer, hace 5 días)."""
    said = words(locale)
    if days == 0:
        return said.today
    if days == 1:
        return said.tomorrow
    if days == -1:
        return said.yesterday
    return (said.in_days if days > 0 else said.days_ago).format(n=abs(days))


@lru_cache(maxsize=8192)  # the same few dates (the night, its due dates) in every email
def long_date(day: date | None, locale: str) -> str:
    """One date style for every email: CLDR's long format for the locale's `date_locale`,
    as Babel writes it ('1 March 2027', '1 de marzo de 2027', '1. März 2027'); '—' for an
    unknown date."""
    if day is None:
        return "—"
    from babel.dates import format_date

    return format_date(day, format="long", locale=words(locale).date_locale)
