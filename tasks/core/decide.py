"""What a rule decides, and the pieces both rules share. The rules themselves are
`renewal_rule.py` and `dunning_rule.py`; their reasons of quarantine are tables
(`reasons.py`). All of it pure, vectorised functions of DataFrames and dates: no I/O, no
row loops.

Every source row the run extracted ends in exactly one place: due (then sent, or already
handled), quarantined with a reason (G6), or not due tonight. Comparisons are NULL-safe
by construction: a missing or unexpected value is a reason, never a silent "no".
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date, timedelta

import numpy as np

from dueflow.tasks.core.calendar import BusinessCalendar
from dueflow.tasks.core.frames import pd
from dueflow.tasks.core.keys import printable_ids
from dueflow.tasks.core.text import one_line

TEXT_LIMIT = 200  # characters of a name, title or number shown in an email
SKIPPED_COLUMNS = ("source_id", "reason")


def _no_skipped() -> pd.DataFrame:
    return pd.DataFrame({c: pd.Series(dtype="string") for c in SKIPPED_COLUMNS})


@dataclass(frozen=True)
class Decision:
    """What one job decided for one run.

    `due` holds every row due tonight (key, recipient and the facts to render);
    `handled` marks those whose key, or a more urgent one of the same cycle, is
    already in the ledger. `quarantined` holds bad rows: `source_id`, `reason`.
    """

    due: pd.DataFrame
    quarantined: pd.DataFrame
    # Rows due tonight that a setting says not to chase (below DUEFLOW_DUNNING_MINIMUM):
    # source_id, reason. Reported once a night in the counts; neither sent nor quarantined.
    skipped: pd.DataFrame = field(default_factory=_no_skipped)

    @property
    def to_reserve(self) -> pd.DataFrame:
        return self.due.loc[~self.due["handled"]]


def lookback_start(as_of: date, calendar: BusinessCalendar | None) -> date:
    """The first day whose due emails go out on `as_of`: the day after the last business day
    before it (as_of itself without a calendar, or when yesterday was open)."""
    if calendar is None or not calendar.active:
        return as_of
    return calendar.previous_open(as_of) + timedelta(days=1)


def closed_tonight(as_of: date, calendar: BusinessCalendar | None) -> bool:
    return calendar is not None and calendar.active and not calendar.is_open(as_of)


def column_text(rows: pd.DataFrame, column: str) -> pd.Series:
    """A source column as text (all NA when the source has no such column)."""
    return rows[column].astype("string") if column in rows else pd.Series(
        pd.NA, index=rows.index, dtype="string")


def id_copies(ids: pd.Series) -> pd.Series:
    """How many rows share each row's id (1 for a unique id; missing ids count apart)."""
    counts = ids.map(ids.value_counts(dropna=True))
    return counts.fillna(1).astype(np.int64)


def quarantine_frame(rows: pd.DataFrame, reason: pd.Series, party: pd.Series | None = None,
                     what: tuple[str, pd.Series, str] | None = None) -> pd.DataFrame:
    """The bad rows: source_id and reason (what is recorded), and what a person knows the row
    by — its party (vendor, client) and `reference`: `what` is (noun, detail, joint), e.g.
    ('contract ', title, ': ') for 'contract c-011: Lab equipment' (the row alone when its
    detail is missing or blank). Each one line; computed for the bad rows only."""
    bad = reason.notna()
    ids = printable_ids(rows.loc[bad, "id"])
    empty = pd.Series("", index=ids.index, dtype="string")
    reference = empty
    if what is not None:
        noun, detail, joint = what
        detail = one_line(detail[bad], TEXT_LIMIT).astype("string")
        reference = (noun + ids).where(detail == "", noun + ids + joint + detail)
    return pd.DataFrame({"source_id": ids, "reason": reason[bad],
                         "party": one_line((empty if party is None else party[bad]), TEXT_LIMIT),
                         "reference": one_line(reference, TEXT_LIMIT)}).reset_index(drop=True)


def most_urgent_first(due: pd.DataFrame) -> pd.DataFrame:
    """Order due rows so that a send cap keeps the most urgent: renewals by lead then
    days left; dunning escalations first, then the longest waiting."""
    if "days_left" in due:
        return due.sort_values(["step_rank", "days_left", "key"], kind="stable")
    return due.sort_values(["step_rank", "days_in_step", "key"], ascending=[False, False, True],
                           kind="stable")


def retried_keys(candidates: pd.DataFrame, rendered: pd.DataFrame) -> pd.Series:
    """Which failed rows a run retries (`candidates`: key, recipient, permanent; `rendered`:
    their messages rendered again, key and recipient): every transient failure that renders,
    and a permanent one only when it would now go to another address — the address it was
    refused at is not tried again."""
    now = candidates.merge(rendered.loc[:, ["key", "recipient"]], on="key", suffixes=("_was", ""))
    readdressed = now["recipient"].astype("string") != now["recipient_was"].astype("string")
    return now.loc[~now["permanent"].astype(bool) | readdressed.fillna(True), "key"]
