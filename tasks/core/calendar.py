"""The business-day calendar (docs/design.md, "Holds, calendar, thresholds, profiles").

Which days an email to a client may go out: the working weekdays (DUEFLOW_BUSINESS_DAYS,
`mon-fri`), less the public holidays of a country or region (DUEFLOW_HOLIDAYS, `ES` or
`ES-MD`, from the `holidays` package) and the company's own closures
(DUEFLOW_CLOSED_DAYS_FILE, parsed here from its text). Counting is numpy's business-day
arithmetic (`busday_count`, `is_busday`): vectorised, no loop over rows.

A holiday's name is always asked for in a language chosen here (`holiday_language`): left
to itself, the holidays package guesses one from the process's locale (LANGUAGE, LC_ALL,
LC_MESSAGES, LANG) and the interpreter's version, so `dueflow check` on a worker under
es_ES said "San José" where one under C.UTF-8 said "Saint Joseph's Day" (issue 45).

Pure: the closures file is read by the settings (blocks/settings.py); the holidays
package computes its dates, it reads nothing.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date, timedelta
from functools import lru_cache

import numpy as np

from dueflow.tasks.core.defaults import OPERATOR_LANGUAGE
from dueflow.tasks.core.frames import pd

WEEKDAYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")
DAY_NAMES = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
EVERY_DAY = "1111111"
# Business days counted back at most this far: a start older than that has waited more
# than any delay allows (365 days at one working day a week still needs < 8 years).
LOOKBACK_DAYS = 8 * 366
MAX_CLOSED_DAYS = 5000  # lines (or days) a closures file may name


class CalendarError(ValueError):
    """A calendar setting that cannot be used; the message names it and says the fix."""


@dataclass(frozen=True)
class BusinessCalendar:
    """The days emails go out. The default, every day open, changes nothing."""

    weekmask: str = EVERY_DAY  # Monday first, '1' = a working day
    country: str | None = None  # holidays: ISO country code
    subdiv: str | None = None  # and region (ES-MD: ES, MD)
    closed: tuple[tuple[date, str], ...] = ()  # the company's closures, with their labels
    # The language holidays are named in: the operator's (DUEFLOW_OPERATOR_LANGUAGE), who
    # reads `check` and `forecast`; never the process's locale.
    language: str = OPERATOR_LANGUAGE

    @property
    def active(self) -> bool:
        return self.weekmask != EVERY_DAY or self.country is not None or bool(self.closed)

    def closed_days(self, start: date, end: date, language: str | None = None) -> dict[date, str]:
        """The holidays and closures from `start` to `end` (inclusive), with their names: a
        holiday's in `language` (a client's locale, where a client reads it), else the
        calendar's (the operator's)."""
        days: dict[date, str] = {}
        if self.country:
            for day, name in _public_holidays(self.country, self.subdiv, start.year, end.year,
                                              language or self.language):
                if start <= day <= end:
                    days[day] = f"holiday: {name}"
        for day, label in self.closed:
            if start <= day <= end:
                days.setdefault(day, f"closed: {label}" if label else "company closure")
        return days

    def _holidays(self, start: date, end: date) -> np.ndarray:
        return np.asarray(sorted(self.closed_days(start, end)), dtype="datetime64[D]")

    def is_open(self, day: date) -> bool:
        return bool(np.is_busday(np.datetime64(day, "D"), weekmask=self.weekmask,
                                 holidays=self._holidays(day, day)))

    def why_closed(self, day: date, language: str | None = None) -> str | None:
        """Why no email goes out on `day` ('Saturday', 'holiday: Epiphany', 'closed: summer'),
        or None when it is a business day; a holiday named as `closed_days` names it."""
        if self.weekmask[day.weekday()] == "0":
            return DAY_NAMES[day.weekday()]
        return self.closed_days(day, day, language).get(day)

    def next_open(self, day: date) -> date:
        """`day` if it is a business day, else the next one."""
        holidays = self._holidays(day, day + timedelta(days=LOOKBACK_DAYS // 8))
        return pd.Timestamp(np.busday_offset(np.datetime64(day, "D"), 0, roll="forward",
                                             weekmask=self.weekmask, holidays=holidays)).date()

    def previous_open(self, day: date) -> date:
        """The last business day strictly before `day` (a year back at most: else `day - 1`)."""
        before = day - timedelta(days=1)
        holidays = self._holidays(before - timedelta(days=366), before)
        found = pd.Timestamp(np.busday_offset(np.datetime64(before, "D"), 0, roll="backward",
                                              weekmask=self.weekmask, holidays=holidays)).date()
        return found if (before - found).days <= 366 else before

    def business_days_after(self, day: date, counts: np.ndarray) -> np.ndarray:
        """`day` (or the next business day, when it is closed) plus each count of business
        days, as datetime64[D]: a pay-by date, `n` business days after the send date."""
        horizon = day + timedelta(days=int(counts.max(initial=0)) * 3 + 30)
        holidays = self._holidays(day, horizon)
        start = np.busday_offset(np.datetime64(day, "D"), 0, roll="forward", weekmask=self.weekmask,
                                 holidays=holidays)
        return np.busday_offset(start, counts, roll="forward", weekmask=self.weekmask, holidays=holidays)

    def business_days_since(self, starts: pd.Series, as_of: date) -> pd.Series:
        """Per start date (datetime64, NaT allowed), the business days in (start, as_of]:
        `n` of them is a delay of `n` business days over. NaN where the start is NaT."""
        earliest = pd.Timestamp(as_of - timedelta(days=LOOKBACK_DAYS))
        given = starts.notna()
        bounded = starts.where(given, earliest)
        bounded = bounded.where(bounded >= earliest, earliest).where(bounded <= pd.Timestamp(as_of),
                                                                   pd.Timestamp(as_of))
        first = (bounded + pd.Timedelta(days=1)).to_numpy(dtype="datetime64[D]")
        end = np.datetime64(as_of + timedelta(days=1), "D")
        counts = np.busday_count(first, end, weekmask=self.weekmask,
                                 holidays=self._holidays(earliest.date(), as_of))
        return pd.Series(counts, index=starts.index, dtype="float64").where(given)


@lru_cache(maxsize=32)
def _public_holidays(country: str, subdiv: str | None, first: int, last: int,
                     language: str) -> tuple[tuple[date, str], ...]:
    import holidays

    named_in = holiday_language(language, *_languages_of(country))
    found = holidays.country_holidays(country, subdiv=subdiv, years=range(first, last + 1),
                                      language=named_in)
    return tuple(sorted(found.items()))


@lru_cache(maxsize=32)
def _languages_of(country: str) -> tuple[tuple[str, ...], str | None]:
    """The languages the holidays package names `country`'s holidays in, and its own: the
    class's, read without making the holidays (which would guess a language)."""
    import holidays

    entity = getattr(holidays, country)  # what country_holidays itself looks up
    return tuple(entity.supported_languages), entity.default_language


def holiday_language(wanted: str, supported: Sequence[str], native: str | None) -> str | None:
    """The language, among those the holidays package has for a country (`supported`, its
    own `native`), to name its holidays in for a reader of `wanted` ('es', 'en_GB'): that
    one; else the same language of another country, the country's own first (`en` in Great
    Britain is en_GB, in Spain en_US); else English; else the country's own. Always one of
    `supported`, or `native` where the package translates nothing (then the names are fixed):
    the package reads the process's locale for any other value, `None` included."""
    base = wanted.partition("_")[0]
    for choice in (wanted, native, *sorted(supported)):
        if choice and choice in supported and choice.partition("_")[0] == base:
            return choice
    for choice in ("en_US", "en_GB", *sorted(supported)):
        if choice in supported and choice.partition("_")[0] == "en":
            return choice
    return native


def parse_business_days(text: str | None, name: str = "DUEFLOW_BUSINESS_DAYS") -> str:
    """`mon-fri`, `mon,tue,thu`, `sun-thu`: the working weekdays as numpy's weekmask."""
    if text is None or not text.strip():
        return EVERY_DAY
    mask = ["0"] * 7
    for part in text.lower().replace(" ", "").split(","):
        ends = part.split("-")
        if len(ends) > 2 or any(e not in WEEKDAYS for e in ends):
            raise CalendarError(f"{name}={text[:60]!r} is not a list of weekdays: write e.g."
                                " mon-fri or mon,tue,wed,thu,fri (days mon…sun)")
        first, last = WEEKDAYS.index(ends[0]), WEEKDAYS.index(ends[-1])
        for offset in range((last - first) % 7 + 1):
            mask[(first + offset) % 7] = "1"
    return "".join(mask)


def parse_holidays(text: str | None, name: str = "DUEFLOW_HOLIDAYS") -> tuple[str | None, str | None]:
    """`ES` or `ES-MD`: a country (and region) the holidays package knows; (None, None) unset."""
    if text is None or not text.strip():
        return None, None
    import holidays

    code = text.strip().upper()
    country, dash, subdiv = code.partition("-")
    supported = holidays.list_supported_countries()
    if dash and not subdiv.strip():  # "ES-": a region meant and not written, not the whole country
        raise CalendarError(f"{name}={text[:40]!r}: the region after '-' is missing; write the country"
                            f" alone (e.g. {country or 'ES'}) or with a region (e.g. ES-MD)")
    if country not in supported:
        raise CalendarError(f"{name}={text[:40]!r}: unknown country; write an ISO code the holidays"
                            " package knows, e.g. ES, or a region, e.g. ES-MD")
    if subdiv and subdiv not in {s.upper() for s in supported[country]}:
        raise CalendarError(f"{name}={text[:40]!r}: {country} has no region {subdiv!r}; its regions:"
                            f" {', '.join(sorted(supported[country]))[:200]}")
    return country, subdiv or None


_CLOSED_LINE = re.compile(r"(\d{4}-\d{2}-\d{2})(?:\s*(?:\.\.|to)\s*(\d{4}-\d{2}-\d{2}))?(?:\s+(.*))?")


def parse_closed_days(text: str, origin: str) -> tuple[tuple[date, str], ...]:
    """The company's closures, one a line: `2027-12-24 Christmas Eve` or a range
    `2027-08-09..2027-08-20 summer closure`; blank lines and `#` comments ignored."""
    days: dict[date, str] = {}
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        match = _CLOSED_LINE.fullmatch(line)
        try:
            if not match:
                raise ValueError
            first = date.fromisoformat(match.group(1))
            last = date.fromisoformat(match.group(2)) if match.group(2) else first
        except ValueError:
            raise CalendarError(f"{origin}, line {number}: {line[:60]!r} is not a closure: write"
                                " YYYY-MM-DD [label] or YYYY-MM-DD..YYYY-MM-DD [label]") from None
        if last < first or (last - first).days + len(days) > MAX_CLOSED_DAYS:
            raise CalendarError(f"{origin}, line {number}: {line[:60]!r}: the range must run forwards"
                                f" and the file name at most {MAX_CLOSED_DAYS} days")
        label = " ".join(re.sub(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]", " ", match.group(3) or "").split())[:80]
        for offset in range((last - first).days + 1):
            days.setdefault(first + timedelta(days=offset), label)
    return tuple(sorted(days.items()))
