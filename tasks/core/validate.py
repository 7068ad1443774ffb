"""Vectorised readings shared by every job: dates, flags, and values quoted for a reason of
quarantine (the reasons themselves: reasons.py)."""

from __future__ import annotations

import re

from dueflow.tasks.core.frames import pd
from dueflow.tasks.core.keys import printable_id
from dueflow.tasks.core.text import lowered, search_rows, stripped

# dunning_paused as either database stores a boolean; anything else is quarantined.
TRUE_TEXT = ("1", "true", "t", "yes", "y", "on")
FALSE_TEXT = ("0", "false", "f", "no", "n", "off", "")


# An offset after a time of day (Z, +01, +0100, +01:00): a date's own "-30" is not one (it
# was read as an offset, and moved a plain date a day back in every zone behind UTC).
_OFFSET = r"\d{2}:\d{2}(?::\d{2}(?:[.,]\d+)?)?\s?(?:[zZ]|[+-]\d{2}(?::?\d{2}(?::?\d{2})?)?)$"
_OFFSET_LINES = re.compile(_OFFSET, re.MULTILINE)
# What a date or timestamp may look like: ISO 8601 as both databases write it (a date, then
# optionally a time and an offset). pandas alone is lenient — "2027" and "2027-1-5" would be
# dates, which SQLite's date() and PostgreSQL do not read: a row either database would not
# date is quarantined, not guessed.
_SHAPE_LINES = re.compile(r"^\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2}(?:[.,]\d+)?)?\s?"
                          r"(?:[zZ]|[+-]\d{2}(?::?\d{2}(?::?\d{2})?)?)?)?$", re.MULTILINE)


def business_dates(values: pd.Series, timezone: str) -> pd.Series:
    """The one reading of a source's date or timestamp column (docs/design.md): each value
    to its date in the business time zone, as datetime64 at midnight. A timestamp with an
    offset is converted to the zone; one without (a `timestamp without time zone` column, a
    date) is already the zone's local time. Anything else — missing, not a date, out of
    range — is NaT, per value: a column mixing every form never raises (its rows with a
    value that is not a date are quarantined by the rules that read it)."""
    text = stripped(values)
    text = text.where(pd.Series(search_rows(text, _SHAPE_LINES), index=values.index))
    aware = pd.Series(search_rows(text, _OFFSET_LINES), index=values.index)
    # cache=False: deciding whether to cache walks the first values one by one. utc=True on
    # both halves: a value pandas reads with a zone the pattern did not see cannot make the
    # column "mixed" (a ValueError) — it is read at UTC instead.
    stamps = pd.to_datetime(text.where(aware), errors="coerce", utc=True, format="ISO8601", cache=False)
    local = stamps.dt.tz_convert(timezone).dt.tz_localize(None)
    naive = text.where(~aware & text.notna())
    if naive.notna().any():
        wall = pd.to_datetime(naive, errors="coerce", utc=True, format="ISO8601", cache=False)
        local = local.where(aware, wall.dt.tz_localize(None))
    return local.dt.normalize()


def as_dates(values: pd.Series) -> pd.Series:
    """Dates dueflow wrote itself (the ledger's `as_of`, a cycle) as datetime64 (midnight);
    anything missing or unparseable is NaT. Source columns are read by `business_dates`."""
    return business_dates(values, "UTC")


def flag_values(values: pd.Series) -> pd.Series:
    """A boolean column as stored by either database: True, False, or NA when it is neither
    (missing counts as False)."""
    text = lowered(values).fillna("")
    return pd.Series(pd.NA, index=values.index, dtype="boolean").mask(
        text.isin(TRUE_TEXT), True).mask(text.isin(FALSE_TEXT), False)


def quote(values: pd.Series) -> pd.Series:
    """Each value quoted for a reason an operator reads: control characters and invalid
    UTF-8 escaped, long values cut."""
    shown = values.astype(object).map(lambda v: "" if v is None or v is pd.NA else printable_id(v))
    return "'" + shown.str.slice(0, 80) + "'"
