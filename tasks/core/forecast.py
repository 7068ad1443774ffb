"""Forecast, the pure part: the ledger that each coming night would find.

A forecast decides night after night with the nightly run's own decide functions
(`core.decide`); all it adds is the ledger history those functions are given. For the
first night that is the ledger as it is; for each later night, the same history plus
every email the earlier forecast nights would have reserved — assumed sent that night,
since the forecast assumes that the nightly run happens every night, that every email
goes out, and that nothing is paid, renewed or changed.

Nothing here reads or writes anything: the adapter (`tasks/forecast.py`) extracts, this
module only extends DataFrames.
"""

from __future__ import annotations

from datetime import date, timedelta

from dueflow.tasks.core.calendar import BusinessCalendar
from dueflow.tasks.core.frames import pd
from dueflow.tasks.core.guard import Bounds, Figures, figures_of, looks_wrong
from dueflow.tasks.core.invoices import hold_ends
from dueflow.tasks.core.keys import printable_ids
from dueflow.tasks.core.statuses import LedgerStatus
from dueflow.tasks.core.validate import as_dates

FORECAST_COLUMNS = ("night", "job", "key", "step", "recipient", "name", "amount", "currency",
                    "subject", "why")
HELD_COLUMNS = ("invoice_id", "client_id", "held_until", "by")
RENEWAL_HISTORY_COLUMNS = ("subject_id", "cycle", "handled_rank")
DUNNING_HISTORY_COLUMNS = ("subject_id", "step", "step_rank", "as_of", "attempt_as_of", "status", "bounce")


def with_reserved_renewals(history: pd.DataFrame, reserved: pd.DataFrame) -> pd.DataFrame:
    """`history` (subject_id, cycle, handled_rank: the most urgent lead reserved per contract
    and cycle, as sql/renewal_history gives it) once the `reserved` alerts (subject_id,
    cycle, step_rank) are in the ledger too."""
    base = history.reindex(columns=list(RENEWAL_HISTORY_COLUMNS)).astype(
        {"subject_id": "string", "cycle": "string"})
    base["handled_rank"] = pd.to_numeric(base["handled_rank"])
    if reserved.empty:
        return base
    added = pd.DataFrame({"subject_id": reserved["subject_id"].astype("string"),
                          "cycle": reserved["cycle"].astype("string"),
                          "handled_rank": pd.to_numeric(reserved["step_rank"])})
    merged = pd.concat([base, added], ignore_index=True) if not base.empty else added
    # as_index=False: a DataFrame (pandas-stubs type it a Series)
    return merged.groupby(["subject_id", "cycle"], as_index=False, sort=False)["handled_rank"].min()  # type: ignore[return-value]


def with_sent_dunning_steps(history: pd.DataFrame, reserved: pd.DataFrame, night: date) -> pd.DataFrame:
    """`history` (the dunning steps in the ledger, as sql/dunning_history gives them) once
    the `reserved` steps (subject_id, step, step_rank) are in it, reserved and sent by the
    run of `night`: the date a later step is counted from, as a real run records it."""
    base = history.reindex(columns=list(DUNNING_HISTORY_COLUMNS)).astype(object)
    if reserved.empty:
        return base
    day = night.isoformat()
    added = pd.DataFrame({"subject_id": reserved["subject_id"].astype(object),
                          "step": reserved["step"].astype(object),
                          "step_rank": pd.to_numeric(reserved["step_rank"]).astype(object),
                          "as_of": day, "attempt_as_of": day,
                          "status": str(LedgerStatus.SENT)}).astype(object)
    return pd.concat([base, added], ignore_index=True) if not base.empty else added


def why_tonight(due_since: pd.Series, night: date, calendar: BusinessCalendar | None) -> pd.Series:
    """Per email, why it goes out on `night` rather than the day it fell due (`due_since`):
    '' when that is tonight; 'moved from 2027-01-02: Saturday, Sunday' when the days between
    were closed (DUEFLOW_BUSINESS_DAYS, DUEFLOW_HOLIDAYS, DUEFLOW_CLOSED_DAYS_FILE); 'due
    since …' otherwise (a night that was not run, a first sight). One wording per distinct
    date, not per row."""
    days = as_dates(due_since.astype("string"))
    words: dict[object, str] = {}
    for since in days.dropna().unique():
        first = pd.Timestamp(since).date()
        if first >= night:
            continue
        closed = [calendar.why_closed(first + timedelta(days=n)) if calendar is not None else None
                  for n in range((night - first).days)]
        if all(closed):
            shown = list(dict.fromkeys(c for c in closed if c))
            words[since] = f"moved from {first.isoformat()}: {', '.join(shown)[:200]}"
        else:
            words[since] = f"due since {first.isoformat()}"
    return days.map(words).fillna("").astype("string")


def held_invoices(invoices: pd.DataFrame, clients: pd.DataFrame, night: date, timezone: str) -> pd.DataFrame:
    """The open invoices held on `night` (an invoice hold or its client's pause ending after
    it): invoice_id, client_id, held_until (the later end), by (what holds it)."""
    invoices = invoices.reset_index(drop=True)
    hold, pause = hold_ends(invoices, clients, timezone)
    tonight = pd.Timestamp(night)
    by_hold, by_pause = (hold > tonight).fillna(False), (pause > tonight).fillna(False)
    held = (by_hold | by_pause).astype(bool)
    if "paid_at" in invoices:
        held &= invoices["paid_at"].isna()
    until = pd.concat([hold.where(by_hold), pause.where(by_pause)], axis=1).max(axis=1)
    by = pd.Series("invoice hold (dunning_hold_until)", index=invoices.index).where(
        by_hold & ~(by_pause & (pause > hold).fillna(True)), "client pause (dunning_paused_until)")
    return pd.DataFrame({"invoice_id": printable_ids(invoices.loc[held, "id"]),
                         "client_id": printable_ids(invoices.loc[held, "client_id"]),
                         "held_until": until[held].dt.date, "by": by[held]}).reset_index(drop=True)


def forecast_rows(night: date, job: str, reserved: pd.DataFrame, names: pd.Series,
                  subjects: dict[str, str], calendar: BusinessCalendar | None = None) -> pd.DataFrame:
    """One forecast row per email of `reserved` (due rows of one job on one night): who gets
    it, about what, its subject (or why it could not be rendered), and why tonight."""
    return pd.DataFrame({
        "night": night,
        "job": job,
        "key": reserved["key"].astype("string"),
        "step": reserved["step"].astype("string"),
        "recipient": reserved["recipient"].astype("string"),
        "name": names.astype("string"),
        "amount": reserved["amount"].astype("string"),
        "currency": reserved["currency"].astype("string"),
        "subject": reserved["key"].map(subjects).astype("string"),
        "why": why_tonight(reserved["due_since"], night, calendar) if "due_since" in reserved else "",
    }).reindex(columns=list(FORECAST_COLUMNS))


def no_forecast_rows() -> pd.DataFrame:
    return pd.DataFrame({column: pd.Series(dtype=object if column == "night" else "string")
                         for column in FORECAST_COLUMNS})


def nights_that_would_wait(rows: pd.DataFrame, recent: list[Figures], open_invoices: int | None,
                           bounds: Bounds) -> list[dict[str, object]]:
    """The forecast's nights that would look wrong (tasks/core/guard.py), each compared with
    the recent nights and the forecast's own nights before it, as if they had gone: night
    and the bounds crossed, in words."""
    waits: list[dict[str, object]] = []
    history = list(recent)
    for night, of_night in rows.groupby("night", sort=True):
        due = {str(job): of_night[of_night["job"] == job] for job in of_night["job"].unique()}
        figures = figures_of(due, open_invoices)
        if tripped := looks_wrong(figures, history, bounds):
            waits.append({"night": night, "bounds": [t.line() for t in tripped]})
        history.insert(0, figures)
    return waits
