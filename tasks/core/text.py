"""Text from the data, made safe to show: one line, no control characters, bounded length."""

from __future__ import annotations

import re

from dueflow.tasks.core.frames import pd

# C0 and C1 controls, DEL, Unicode line/paragraph separators, and lone surrogates.
CONTROL = r"[\x00-\x1f\x7f-\x9f\u2028\u2029\ud800-\udfff]"
SURROGATE = r"[\ud800-\udfff]"


_CONTROL = re.compile(CONTROL)
_SURROGATE = re.compile(SURROGATE)
_SPACES = re.compile(r"\s+")

# These run over every extracted row: plain comprehensions over the values, which beat a
# chain of pandas string methods (each a Python loop of its own) at every size.


def text_or_none(value: object) -> str | None:
    """A cell as text, or None when it is missing (None, NaN, NA, NaT)."""
    if value is None or value is pd.NA or value is pd.NaT or (isinstance(value, float) and value != value):
        return None
    return value if isinstance(value, str) else str(value)


def invalid_utf8(values: pd.Series) -> pd.Series:
    """True where a value held bytes that are not UTF-8 (SQLite hands them over as
    surrogate escapes; PostgreSQL never stores them)."""
    items = values.tolist()
    if not _SURROGATE.search("".join(v for v in items if isinstance(v, str))):
        return pd.Series(False, index=values.index)  # the usual case, at C speed
    return pd.Series([isinstance(v, str) and _SURROGATE.search(v) is not None for v in items],
                     index=values.index, dtype=bool)


def one_line(values: pd.Series, limit: int) -> pd.Series:
    """Each value on one line: control characters and whitespace runs become one space,
    the ends are trimmed, and anything past `limit` characters is cut with '…'. Missing
    values become ''."""
    return pd.Series(["" if text is None else clean_line(text, limit)
                      for text in map(text_or_none, values.tolist())],
                     index=values.index, dtype="string")


def clean_line(value: str, limit: int) -> str:
    """`one_line` for one value (no pandas: it runs once per email)."""
    text = _SPACES.sub(" ", _CONTROL.sub(" ", value)).strip()
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"
