"""Vectorised checks shared by every job: dates, flags, and the reasons of quarantine."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from dueflow.tasks.core.frames import pd
from dueflow.tasks.core.keys import printable_id
from dueflow.tasks.core.text import lowered

# dunning_paused as either database stores a boolean; anything else is quarantined.
TRUE_TEXT = ("1", "true", "t", "yes", "y", "on")
FALSE_TEXT = ("0", "false", "f", "no", "n", "off", "")


def as_dates(values: pd.Series) -> pd.Series:
    """Dates as datetime64 (midnight); anything missing, unparseable or out of range is NaT."""
    # cache=False: deciding whether to cache walks the first values one by one.
    return pd.to_datetime(values.astype("string"), errors="coerce", format="ISO8601",
                          cache=False).dt.normalize()


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


Reason = str | Callable[[pd.Index], pd.Series]


def first_reason(checks: Sequence[tuple[pd.Series, Reason]], index: pd.Index) -> pd.Series:
    """The reason of the first failing check per row (NA where every check passes). A
    reason is a text, or a function of the failing rows' index that words it for them:
    values are quoted only for the rows that need it."""
    reasons = pd.Series(pd.NA, index=index, dtype="string")
    undecided = np.ones(len(index), dtype=bool)  # numpy: a check costs microseconds, not 0.1 ms
    for failed, reason in checks:
        aligned = failed if failed.index.equals(index) else failed.reindex(index)
        hit = aligned.to_numpy(dtype=bool, na_value=False) & undecided
        if hit.any():
            rows = index[hit]
            reasons[rows] = reason if isinstance(reason, str) else reason(rows)
            undecided &= ~hit
    return reasons
