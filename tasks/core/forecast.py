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

from datetime import date

from dueflow.tasks.core.frames import pd
from dueflow.tasks.core.statuses import LedgerStatus

FORECAST_COLUMNS = ("night", "job", "key", "step", "recipient", "name", "amount", "currency",
                    "subject")
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


def forecast_rows(night: date, job: str, reserved: pd.DataFrame, names: pd.Series,
                  subjects: dict[str, str]) -> pd.DataFrame:
    """One forecast row per email of `reserved` (due rows of one job on one night): who gets
    it, about what, and its subject (or why it could not be rendered)."""
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
    }).reindex(columns=list(FORECAST_COLUMNS))


def no_forecast_rows() -> pd.DataFrame:
    return pd.DataFrame({column: pd.Series(dtype=object if column == "night" else "string")
                         for column in FORECAST_COLUMNS})
