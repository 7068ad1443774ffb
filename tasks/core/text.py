"""Text from the data, made safe to show: one line, no control characters, bounded length."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from dueflow.tasks.core.frames import pd

# C0 and C1 controls, DEL, Unicode line/paragraph separators, and lone surrogates.
CONTROL = r"[\x00-\x1f\x7f-\x9f\u2028\u2029\ud800-\udfff]"
SURROGATE = r"[\ud800-\udfff]"


# Set in a frame's attrs by a reader whose database cannot hold invalid UTF-8 (PostgreSQL):
# the rules then skip that check, which reads every value of every text column.
VALID_UTF8 = "dueflow_valid_utf8"

_CONTROL = re.compile(CONTROL)
_SURROGATE = re.compile(SURROGATE)
_SPACES = re.compile(r"\s+")

# These run over every extracted row: whole columns at C speed (a join, one regular
# expression search, numpy), never a Python function per value.


def text_or_none(value: object) -> str | None:
    """A cell as text, or None when it is missing (None, NaN, NA, NaT)."""
    if value is None or value is pd.NA or value is pd.NaT or (isinstance(value, float) and value != value):
        return None
    return value if isinstance(value, str) else str(value)


def present_texts(values: pd.Series) -> tuple[np.ndarray, list[str]]:
    """Where values are present, and those values as text (str() of each, in C). Over the
    column's array rather than the Series: a Series' mask and astype cost 150 µs a call,
    and the small frames of a steady night made some 200 such calls."""
    array = values.array
    present = ~np.asarray(array.isna(), dtype=bool)
    return present, list(map(str, array.to_numpy(dtype=object)[present]))


def rows_matching(values: pd.Series, pattern: re.Pattern[str]) -> np.ndarray:
    """Whether each value (as text; a missing one never) holds a match of `pattern`, a
    one-character class."""
    present, texts = present_texts(values)
    hits = np.zeros(len(values), dtype=bool)
    hits[present] = _matching(texts, pattern)
    return hits


def _matching(texts: list[str], pattern: re.Pattern[str]) -> np.ndarray:
    """`rows_matching` over texts: one search over them joined by a space, then only the
    matches, if any, are placed in their rows."""
    hits = np.zeros(len(texts), dtype=bool)
    joined = " ".join(texts)
    if not pattern.search(joined):
        return hits  # the usual case
    lengths = np.fromiter(map(len, texts), dtype=np.int64, count=len(texts))
    starts = np.cumsum(lengths + 1) - (lengths + 1)
    found = np.fromiter((m.start() for m in pattern.finditer(joined)), dtype=np.int64)
    hits[np.searchsorted(starts, found, side="right") - 1] = True
    return hits


def invalid_utf8(values: pd.Series) -> pd.Series:
    """True where a value held bytes that are not UTF-8 (SQLite hands them over as
    surrogate escapes; PostgreSQL never stores them)."""
    return pd.Series(rows_matching(values, _SURROGATE), index=values.index, dtype=bool)


def strings(values: pd.Series, missing: str = "") -> tuple[np.ndarray, np.ndarray]:
    """The values as a numpy string array (missing ones as `missing`), and where present."""
    present, texts = present_texts(values)
    out = np.full(len(values), missing, dtype=object)
    out[present] = texts
    return np.asarray(out.tolist(), dtype=str) if len(out) else np.asarray([], dtype=str), present


def _series(array: np.ndarray, present: np.ndarray, index: pd.Index) -> pd.Series:
    values = array.astype(object)
    values[~present] = None  # missing stays missing (NA)
    return pd.Series(values, index=index, dtype="string")


def stripped(values: pd.Series) -> pd.Series:
    """`.str.strip()` over the column in numpy (missing stays missing)."""
    array, present = strings(values)
    return _series(np.strings.strip(array), present, values.index)


def lowered(values: pd.Series) -> pd.Series:
    """`.str.strip().str.lower()` over the column in numpy (missing stays missing)."""
    array, present = strings(values)
    return _series(np.strings.lower(np.strings.strip(array)), present, values.index)


# The mark of a match (numpy drops trailing NULs, so not NUL), and what no value may hold here.
_MARK = "\x01"
_LINE_BREAKS = re.compile(r"[\n\r\x00\x01]")


@dataclass(frozen=True)
class Lines:
    """A column made ready for `search_rows` by several patterns: its values present, as
    text, joined by line breaks once (a value holding a line break, NUL or \\x01 stands
    there as '' and is searched alone)."""

    present: np.ndarray  # per row
    texts: list[str]  # the present values
    broken: np.ndarray  # per present value
    kept: list[str]  # the present values, '' where broken
    joined: str  # kept, joined by "\n"


def lines(values: pd.Series) -> Lines:
    present, texts = present_texts(values)
    broken = _matching(texts, _LINE_BREAKS)
    kept = texts
    if broken.any():
        held = np.asarray(texts, dtype=object)
        held[broken] = ""
        kept = held.tolist()
    return Lines(present, texts, broken, kept, "\n".join(kept))


def search_rows(values: pd.Series | Lines, pattern: re.Pattern[str]) -> np.ndarray:
    """Whether each value holds a match of `pattern` (re.MULTILINE, not crossing a line;
    `$` is a value's end), by one substitution over the values joined by line breaks."""
    column = values if isinstance(values, Lines) else lines(values)
    hits = np.zeros(len(column.present), dtype=bool)
    if not column.texts:
        return hits
    marked = pattern.sub(_MARK, column.joined)
    if _MARK not in marked:
        found = np.zeros(len(column.kept), dtype=bool)
    else:
        pieces = marked.split("\n")
        if len(pieces) != len(column.kept):  # a match ate a line break ([^@] does): value by value
            pieces = [pattern.sub(_MARK, text) for text in column.kept]
        found = np.strings.find(np.asarray(pieces, dtype=str), _MARK) >= 0
    if column.broken.any():  # the few values with a line break, one by one
        found[column.broken] = [pattern.search(t.replace("\n", " ")) is not None
                                for t in np.asarray(column.texts, dtype=object)[column.broken]]
    hits[column.present] = found
    return hits


_MESSY = re.compile(CONTROL + r"|\s\s|[^\S ]")


def one_line(values: pd.Series, limit: int) -> pd.Series:
    """Each value on one line: control characters and whitespace runs become one space,
    the ends are trimmed, and anything past `limit` characters is cut with '…'. Missing
    values become ''. Over the column in numpy; values with controls or runs of
    whitespace, rare, go through `clean_line`."""
    array, _present = strings(values)
    if not len(array):
        return pd.Series([], index=values.index, dtype="string")
    messy = rows_matching(values, _MESSY)
    text = np.strings.strip(array).astype(object)
    if messy.any():
        text[messy] = [clean_line(t, limit) for t in array[messy]]
    text = np.asarray(text.tolist(), dtype=str)
    long = (np.strings.str_len(text) > limit) & ~messy
    if long.any():
        text[long] = np.strings.add(np.strings.rstrip(np.strings.slice(text[long], 0, limit - 1)), "…")
    return pd.Series(text.astype(object), index=values.index, dtype="string")


def clean_line(value: str, limit: int) -> str:
    """`one_line` for one value (no pandas: it runs once per email)."""
    text = _SPACES.sub(" ", _CONTROL.sub(" ", value)).strip()
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def wrapped_table(header: Sequence[str], rows: Iterable[Sequence[str]],
                  caps: Sequence[int | None]) -> list[str]:
    """An aligned plain-text table for the terminal whose cells wrap at whole words: a
    column is at most its cap wide (None: as wide as its widest value), and a longer value
    goes on to the next lines of its row — never cut mid-word (a single word longer than
    the cap, an address or a key, is the only thing broken)."""
    import textwrap

    body = [[" ".join(str(cell).split()) for cell in row] for row in rows]
    table = [list(header), *body]
    widths = [max(len(row[i]) for row in table) for i in range(len(header))]
    widths = [w if cap is None else max(len(header[i]), min(w, cap)) for i, (w, cap) in
              enumerate(zip(widths, caps, strict=True))]
    lines = []
    for row in table:
        parts = [textwrap.wrap(cell, width, break_on_hyphens=False) or [""]
                 for cell, width in zip(row, widths, strict=True)]
        for n in range(max(len(p) for p in parts)):
            cells = [(p[n] if n < len(p) else "").ljust(w) for p, w in zip(parts, widths, strict=True)]
            lines.append("  ".join(cells).rstrip())
    return lines
