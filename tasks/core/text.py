"""Text from the data, made safe to show: one line, no control characters, bounded length."""

from __future__ import annotations

import re

import pandas as pd

# C0 and C1 controls, DEL, Unicode line/paragraph separators, and lone surrogates.
CONTROL = r"[\x00-\x1f\x7f-\x9f\u2028\u2029\ud800-\udfff]"
SURROGATE = r"[\ud800-\udfff]"


def invalid_utf8(values: pd.Series) -> pd.Series:
    """True where a value held bytes that are not UTF-8 (SQLite hands them over as
    surrogate escapes; PostgreSQL never stores them)."""
    return values.astype("string").str.contains(SURROGATE, regex=True).fillna(False).astype(bool)


def one_line(values: pd.Series, limit: int) -> pd.Series:
    """Each value on one line: control characters and whitespace runs become one space,
    the ends are trimmed, and anything past `limit` characters is cut with '…'. Missing
    values become ''."""
    text = (values.astype("string").fillna("").str.replace(CONTROL, " ", regex=True)
            .str.replace(r"\s+", " ", regex=True).str.strip())
    long = text.str.len() > limit
    return text.where(~long, text.str.slice(0, limit - 1).str.rstrip() + "…")


_CONTROL = re.compile(CONTROL)
_SPACES = re.compile(r"\s+")


def clean_line(value: str, limit: int) -> str:
    """`one_line` for one value (no pandas: it runs once per email)."""
    text = _SPACES.sub(" ", _CONTROL.sub(" ", value)).strip()
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"
