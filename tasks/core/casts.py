"""The expressions dueflow proposes for reading a column of another type (issue 38): in a
`check` hint, in `dueflow sources init`'s draft, and after a mapping's expression failed.

A CAST that fails on one row fails the statement, and with it every reminder of the night
(tasks/adapters/sources.py, `failing_expressions`). Every expression here gives NULL for a
value it cannot read instead — the row is then quarantined with the reason and every
other row goes: the CAST is only reached through a pattern that admits exactly what it
reads (for a date, the days that exist: month lengths and leap years included, written
without backslashes so that the expression can sit in a TOML string as it is).

Pure: PostgreSQL's SQL text, built from a column's SQL and the type the database reported.
SQLite's CAST never fails (a date there is text its date() reads, NULL when it cannot), so
its sources need none of these.
"""

from __future__ import annotations

import json
import re

from dueflow.tasks.core.sources import Kind

_YEAR = "([0-9]{3}[1-9]|[0-9]{2}[1-9]0|[0-9][1-9]00|[1-9]000)"  # 0001..9999: PostgreSQL has no year 0
_LEAP_YEAR = "([0-9]{2}(0[48]|[2468][048]|[13579][26])|(0[48]|[2468][048]|[13579][26])00)"


def date_pattern(sep: str = "-") -> str:
    """A day that exists, written YYYY-MM-DD (`sep` between the parts)."""
    month_day = (f"((0[13578]|1[02]){sep}(0[1-9]|[12][0-9]|3[01])|(0[469]|11){sep}(0[1-9]|[12][0-9]|30)"
                 f"|02{sep}(0[1-9]|1[0-9]|2[0-8]))")
    return f"^({_YEAR}{sep}{month_day}|{_LEAP_YEAR}{sep}02{sep}29)$"


# What CAST(… AS date) reads whatever DateStyle says; and the same days as 20270115.
ISO_DATE = date_pattern()
DIGITS_DATE = date_pattern("")
# A decimal number: digits, one point, a sign; no exponent (an enormous one overflows).
DECIMAL = "^[-+]?([0-9]+[.]?[0-9]*|[.][0-9]+)$"
WHOLE = "^[-+]?[0-9]+$"

_TEXTUAL = frozenset({"text", "varchar", "bpchar", "name", "citext"})
_INTEGERS = frozenset({"int2", "int4", "int8"})


def quoted_name(name: str) -> str:
    """A column's name as SQL writes it: bare when PostgreSQL folds it to itself."""
    return name if re.fullmatch(r"[a-z_][a-z0-9_]*", name) else '"' + name.replace('"', '""') + '"'


def guarded(value_sql: str, pattern: str, target: str) -> str:
    """`CAST(value AS target)` for a text that matches `pattern`, else NULL."""
    return f"CASE WHEN {value_sql} ~ '{pattern}' THEN CAST({value_sql} AS {target}) END"


def null_safe_reading(column_sql: str, kind: Kind, type_seen: str) -> str | None:
    """An expression that reads a PostgreSQL column of `type_seen` as dueflow reads `kind`,
    NULL for a value it cannot read; None when no expression would (a boolean is read as a
    status through a value map, not an expression)."""
    as_text = column_sql if type_seen in _TEXTUAL else f"CAST({column_sql} AS text)"
    if kind == Kind.DATE:
        if type_seen in _INTEGERS:  # 20270115
            digits = f"CAST({column_sql} AS text)"
            return f"CASE WHEN {digits} ~ '{DIGITS_DATE}' THEN to_date({digits}, 'YYYYMMDD') END"
        return guarded(f"btrim({as_text})", ISO_DATE, "date")
    if kind == Kind.TIMESTAMP:
        return None  # text, dates and timestamps are read as they are; another type's meaning is unknown
    if kind == Kind.AMOUNT:
        return f"CAST({column_sql} AS numeric)" if type_seen == "money" else guarded(
            f"btrim({as_text})", DECIMAL, "numeric")
    if kind in (Kind.STATUS, Kind.LOCALE) and type_seen == "bool":
        return None
    return as_text  # ids, text, statuses, locales, flags: every type has a text, never an error


_CAST = re.compile(r"^\s*CAST\s*\(\s*(?P<value>.+?)\s+AS\s+(?P<type>[a-z ]+?)\s*\)\s*$", re.IGNORECASE)
_COLON_CAST = re.compile(r"^\s*(?P<value>[A-Za-z_][A-Za-z0-9_.\"]*)\s*::\s*(?P<type>[a-z ]+?)\s*$",
                         re.IGNORECASE)
_PATTERNS = {"date": (ISO_DATE, "date"), "numeric": (DECIMAL, "numeric"), "decimal": (DECIMAL, "numeric"),
             "integer": (WHOLE, "numeric"), "int": (WHOLE, "numeric"), "bigint": (WHOLE, "numeric"),
             "smallint": (WHOLE, "numeric"), "int4": (WHOLE, "numeric"), "int8": (WHOLE, "numeric")}


def safe_cast(expression: str) -> str | None:
    """The NULL-safe form of a mapping's expression that is one CAST of a value to a date or
    a number (`CAST(x AS date)`, `x::numeric`); None for any other expression. A whole
    number is read as numeric: it never overflows where an integer would."""
    found = _CAST.match(expression) or _COLON_CAST.match(expression)
    if not found or (target := " ".join(found["type"].lower().split())) not in _PATTERNS:
        return None
    pattern, read_as = _PATTERNS[target]
    return guarded(f"btrim(CAST({found['value'].strip()} AS text))", pattern, read_as)


def toml_string(text: str) -> str:
    """`text` as a TOML basic string (JSON's escapes are TOML's)."""
    return json.dumps(text, ensure_ascii=False)
