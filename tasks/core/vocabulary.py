"""The one vocabulary of outcomes people read (issue 38): what each outcome of an email is
called, what it means and what to do about it — the same words in the CLI, the log, the
summary and table artifacts, `dueflow ledger` and `dueflow invoices`. Every place takes
its wording from here (tests/unit/test_vocabulary.py holds them to it)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from dueflow.tasks.core.frames import pd
from dueflow.tasks.core.statuses import LedgerStatus, RowStatus


@dataclass(frozen=True)
class Wording:
    """One outcome: its status word, its meaning (a count's label says it after the
    number), and what to do, `{key}` and `{when}` filled in where they are known."""

    status: str
    meaning: str
    todo: str


RETRY_WHEN = " after {when}"  # said after "a later run retries it" when retry_after is known
OUTCOMES: dict[RowStatus, Wording] = {
    RowStatus.SENT: Wording("sent", "accepted by the mail server", ""),  # nothing to do: said by nothing
    RowStatus.FAILED: Wording("failed", "refused before it left; retried later",
                              "nothing: a later run retries it{when}"),
    RowStatus.FAILED_PERMANENTLY: Wording(
        "failed permanently", "refused for good by the mail server (5xx); not retried to the same address",
        "fix the address (the next run sends it), or `dueflow resolve {key} --as retry`"),
    RowStatus.PENDING: Wording("pending", "handed to the mail server, outcome unknown",
                               "check the mail server's log, then `dueflow resolve {key} --as sent`"
                               " (or `--as failed`)"),
    RowStatus.NOT_SENT: Wording("not sent", "never handed to the mail server",
                                "nothing: the next run sends it"),
    RowStatus.BOUNCED: Wording("bounced", "accepted, then reported undeliverable",
                               "fix the address, then `dueflow resolve {key} --as retry`"),
    RowStatus.QUARANTINED: Wording("quarantined", "the source row cannot be used",
                                   "fix the source row (`dueflow quarantine`); the next run picks it up"),
}
# Each outcome's status word is the RowStatus itself: one spelling.
assert all(str(status) == wording.status for status, wording in OUTCOMES.items())


def when_text(moment: object) -> str:
    """A retry time as people read it: '2027-01-15 02:00 UTC'; '' when unknown."""
    if moment is None or (not isinstance(moment, str | datetime) and pd.isna(moment)):  # type: ignore[call-overload]
        return ""
    stamp = pd.Timestamp(moment)  # type: ignore[arg-type]  # a datetime, a Timestamp or ISO text
    if pd.isna(stamp):
        return ""
    stamp = stamp.tz_localize("UTC") if stamp.tzinfo is None else stamp.tz_convert("UTC")
    return stamp.strftime("%Y-%m-%d %H:%M UTC")


def todo(status: RowStatus | str, key: str = "KEY", retry_after: object = None) -> str:
    """What to do about one outcome ('' for a status that asks nothing of anyone)."""
    wording = OUTCOMES.get(RowStatus(str(status))) if str(status) in _VALUES else None
    if wording is None:
        return ""
    when = when_text(retry_after)
    return wording.todo.format(key=key, when=RETRY_WHEN.format(when=when) if when else "")


_VALUES = {str(s) for s in RowStatus}


def todos(status: pd.Series, key: pd.Series, retry_after: pd.Series | None = None) -> pd.Series:
    """`todo` for a column of outcomes, vectorised per outcome (an export's table runs
    through millions of rows): each template is cut at its `{key}` or `{when}` and the
    column put in between."""
    status = status.astype("string")
    out = pd.Series("", index=status.index, dtype=object)
    for outcome, wording in OUTCOMES.items():
        hit = (status == str(outcome)).fillna(False).to_numpy(dtype=bool)
        if not hit.any():
            continue
        if "{key}" in wording.todo:
            before, after = wording.todo.split("{key}")
            out[hit] = before + key[hit].astype("string") + after
        elif "{when}" in wording.todo:
            before, after = wording.todo.split("{when}")
            when = (retry_after[hit].map(when_text) if retry_after is not None
                    else pd.Series("", index=status.index[hit]))
            out[hit] = before + when.where(when == "", RETRY_WHEN.split("{when}")[0] + when) + after
        else:
            out[hit] = wording.todo
    return out


def ledger_outcomes(status: pd.Series, permanent: pd.Series, sending_at: pd.Series) -> pd.Series:
    """The outcome of ledger rows in the vocabulary: a failed row is `failed` (retried
    later) or `failed permanently`; a pending row no delivery claimed is `not sent`."""
    status = status.astype("string")
    out = status.copy()
    failed = (status == LedgerStatus.FAILED).fillna(False).astype(bool)  # no row (NA): no outcome
    pending = (status == LedgerStatus.PENDING).fillna(False).astype(bool)
    out = out.mask(failed & permanent.fillna(False).astype(bool), str(RowStatus.FAILED_PERMANENTLY))
    out = out.mask(pending & sending_at.isna(), str(RowStatus.NOT_SENT))
    return out


def failed_earlier_detail(key: str, permanent: bool, attempts: int, max_attempts: int,
                          retry_after: object, error: str | None) -> str:
    """Why a due key that failed in an earlier run is not retried tonight."""
    reason = f" ({error})" if error else ""
    if permanent:
        return (f"failed permanently in an earlier run{reason}: not retried to the same address — "
                + todo(RowStatus.FAILED_PERMANENTLY, key))
    if attempts >= max_attempts:
        return (f"failed in an earlier run{reason}; out of attempts ({attempts} of {max_attempts}):"
                f" `dueflow resolve {key} --as retry` sends it once more")
    when = when_text(retry_after)
    return f"failed in an earlier run{reason}; " + (f"next attempt after {when}" if when else
                                                   "a later run retries it")
