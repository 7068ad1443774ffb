"""Where each invoice stands in its dunning steps, from the ledger: its last step, whether
that one is done or bounced, the wait before the next, the day that wait counts from and
the days elapsed since (calendar or business days). Pure and vectorised; the dunning rule
(dunning_rule.py) computes each of these once per night."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date, timedelta

import numpy as np

from dueflow.tasks.core.calendar import BusinessCalendar
from dueflow.tasks.core.decide import column_text
from dueflow.tasks.core.frames import pd
from dueflow.tasks.core.keys import DUNNING_STEPS
from dueflow.tasks.core.statuses import STEP_DONE, LedgerStatus
from dueflow.tasks.core.validate import as_dates


def current_dunning_steps(history: pd.DataFrame) -> pd.DataFrame:
    """Per invoice, the last step reserved (highest step_rank), its date — the business
    date of the run that got it out, or that reserved it while it is not out — and
    whether it is done (sent or adopted), which the next step waits for."""
    columns = {"current_rank": pd.Series(dtype="int64"), "step_date": pd.Series(dtype="datetime64[ns]"),
               "step_done": pd.Series(dtype="bool"), "step_bounced": pd.Series(dtype="bool")}
    if history.empty:
        return pd.DataFrame(columns, index=pd.Index([], dtype="string", name="subject_id"))
    ordered = history.assign(subject_id=history["subject_id"].astype("string"),
                             step_rank=pd.to_numeric(history["step_rank"])).sort_values(
        ["subject_id", "step_rank"])
    last = ordered.drop_duplicates("subject_id", keep="last").set_index("subject_id")
    attempted = last["attempt_as_of"] if "attempt_as_of" in last else pd.Series(pd.NA, index=last.index)
    return pd.DataFrame({
        "current_rank": last["step_rank"].astype("int64"),
        "step_date": as_dates(attempted.astype("string").fillna(last["as_of"].astype("string"))),
        "step_done": last["status"].astype("string").isin([s.value for s in STEP_DONE]).fillna(False)
        if "status" in last else True,
        "step_bounced": (last["status"].astype("string") == LedgerStatus.BOUNCED).fillna(False)
        if "status" in last else False,
    })


@dataclass(frozen=True)
class DunningSteps:
    """Each invoice's last step in the ledger (rank 0: none yet), whether it is done, the
    date it got out, and the wait before the next one."""

    rank: np.ndarray
    done: np.ndarray
    step_date: pd.Series  # NaT where rank is 0 (the start date dates SENT)
    wait: pd.Series
    bounced: np.ndarray  # the last step bounced (a step still to come): the escalation is next


def steps_of(rows: pd.DataFrame, history: pd.DataFrame, delays: Sequence[int] | pd.DataFrame) -> DunningSteps:
    """`delays`: the three waits for every row, or per row (columns d1, d2, d3: each row's
    profile)."""
    current = current_dunning_steps(history).reindex(column_text(rows, "id"))
    rank = current["current_rank"].fillna(0).astype("int64").to_numpy()
    if isinstance(delays, pd.DataFrame):
        table = np.column_stack([delays[["d1", "d2", "d3"]].to_numpy(dtype=np.int64),
                                 np.zeros(len(rows), dtype=np.int64)])
        wait = table[np.arange(len(rows)), np.minimum(rank, len(DUNNING_STEPS))]
    else:
        wait = np.asarray([*delays, 0])[np.minimum(rank, len(delays))]
    return DunningSteps(rank=rank,
                        done=current["step_done"].fillna(True).astype(bool).to_numpy(),  # SENT is always done
                        step_date=pd.Series(current["step_date"].to_numpy(), index=rows.index),
                        wait=pd.Series(wait, index=rows.index),
                        bounced=current["step_bounced"].fillna(False).astype(bool).to_numpy()
                        & (rank < len(DUNNING_STEPS)))


def anchor_of(steps: DunningSteps, start_date: pd.Series, hold_end: pd.Series | None = None) -> pd.Series:
    """The day each invoice's wait counts from: its last step's date (or its start, before
    any step), or the end of a hold that ends later — the clock does not run while an
    invoice is held."""
    anchor = steps.step_date.where(steps.rank > 0, start_date)
    if hold_end is None:
        return anchor
    return anchor.where(~(hold_end > anchor).fillna(False).astype(bool), hold_end)


def may_be_due(steps: DunningSteps, elapsed: pd.Series) -> pd.Series:
    """The next step's wait is over (or the step's date is unreadable: quarantined)."""
    return pd.Series(steps.rank < len(DUNNING_STEPS), index=elapsed.index) & (
        (elapsed >= steps.wait) | elapsed.isna()).astype(bool)


def elapsed_days(anchor: pd.Series, unit: pd.Series, as_of: date, calendar: BusinessCalendar | None
                 ) -> pd.Series:
    """Days since `anchor` on `as_of`, in each row's unit: calendar days, or the business
    days in (anchor, as_of] (every day is one without a calendar)."""
    days = (pd.Timestamp(as_of) - anchor).dt.days.astype("float64")
    business = (unit == "business").to_numpy()
    if calendar is None or not calendar.active or not business.any():
        return days
    return days.where(~business, calendar.business_days_since(anchor, as_of))


def due_since_of(anchor: pd.Series, wait: pd.Series, unit: pd.Series, calendar: BusinessCalendar | None
                 ) -> pd.Series:
    """The first day each row's next step was due: its wait after its anchor (for a business
    unit, the wait-th business day after it). A later night means closed days moved it."""
    plain = anchor + pd.to_timedelta(wait, unit="D")
    business = (unit == "business").to_numpy() & anchor.notna().to_numpy()
    if calendar is None or not calendar.active or not business.any():
        return plain
    first, last = anchor[business].min().date(), anchor[business].max().date()
    holidays = np.asarray(sorted(calendar.closed_days(first, last + timedelta(days=3 * 366))),
                          dtype="datetime64[D]")
    # The first business day after the anchor, then wait - 1 more (wait >= 1 while a step is to come).
    moved = np.busday_offset(anchor[business].to_numpy(dtype="datetime64[D]") + np.timedelta64(1, "D"),
                             np.maximum(wait[business].to_numpy(dtype=np.int64) - 1, 0), roll="forward",
                             weekmask=calendar.weekmask, holidays=holidays)
    out = plain.copy()
    out[business] = pd.to_datetime(moved)
    return out
