"""Decisions: pure, vectorised functions of DataFrames and dates. No I/O, no row loops."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date, timedelta

import numpy as np
import pandas as pd

from tasks.validate import as_amounts, as_dates, first_reason, known_currency, quote, valid_email

RENEWAL_COLUMNS = (
    "key", "subject_id", "cycle", "step", "step_rank", "recipient", "vendor", "title",
    "amount", "currency", "renewal_date", "days_left", "handled",
)


@dataclass(frozen=True)
class Decision:
    """What one job decided for one run.

    `due` holds every row due tonight (key, recipient and the facts to render);
    `handled` marks those whose key, or a more urgent one of the same cycle, is
    already in the ledger. `quarantined` holds bad rows: `source_id`, `reason`.
    """

    due: pd.DataFrame
    quarantined: pd.DataFrame

    @property
    def to_reserve(self) -> pd.DataFrame:
        return self.due.loc[~self.due["handled"]]


def normalise_leads(leads: Sequence[int]) -> list[int]:
    """Leads sorted from most to least urgent; they must be distinct non-negative days."""
    cleaned = sorted({int(lead) for lead in leads})
    if not cleaned or cleaned[0] < 0:
        raise ValueError(f"renewal leads must be non-negative day counts, got {list(leads)!r}")
    return cleaned


def renewal_window(as_of: date, leads: Sequence[int]) -> tuple[date, date]:
    """The renewal dates that can be due on `as_of`: [as_of, as_of + widest lead]."""
    return as_of, as_of + timedelta(days=max(normalise_leads(leads)))


def due_lead(days_left: np.ndarray, leads: Sequence[int]) -> np.ndarray:
    """The smallest lead L with 0 <= d <= L for each d, or -1 where nothing is due."""
    ordered = np.asarray(normalise_leads(leads))
    position = np.searchsorted(ordered, days_left, side="left")
    due = (days_left >= 0) & (position < len(ordered))
    return np.where(due, ordered[np.minimum(position, len(ordered) - 1)], -1)


def due_renewal_alerts(
    contracts: pd.DataFrame,
    history: pd.DataFrame,
    as_of: date,
    leads: Sequence[int],
) -> Decision:
    """Renewal alerts due on `as_of` (DESIGN.md, "Rules, exactly").

    contracts: id, vendor, title, amount, currency, renewal_date, notify_email, status.
    history: subject_id, cycle, handled_rank — the most urgent lead already reserved
    per contract and cycle (cycle = renewal date as YYYY-MM-DD).
    """
    rows = contracts.reset_index(drop=True)
    status = rows["status"].astype("string")
    cancelled = (status == "cancelled").fillna(False).astype(bool)
    renewal = as_dates(rows["renewal_date"])
    days_left = (renewal - pd.Timestamp(as_of)).dt.days
    lead = pd.Series(
        due_lead(days_left.fillna(-1).to_numpy(dtype=np.int64), leads), index=rows.index
    ).where(renewal.notna(), -1)

    bad_date = renewal.isna() & ~cancelled
    candidate = (lead >= 0) & ~cancelled
    amount = as_amounts(rows["amount"])
    reason = first_reason(
        [
            (bad_date, "renewal_date missing or not a date"),
            (status.isna(), "status missing"),
            (status != "active", "unknown status " + quote(status)),
            (rows["notify_email"].isna(), "notify_email missing"),
            (~valid_email(rows["notify_email"]), "notify_email is not a valid address: "
             + quote(rows["notify_email"])),
            (amount.isna(), "amount missing or not a number"),
            (~known_currency(rows["currency"]), "unknown currency " + quote(rows["currency"])),
            (rows["vendor"].astype("string").str.strip().fillna("") == "", "vendor missing"),
        ],
        rows.index,
    ).where(bad_date | candidate)
    bad = reason.notna()
    quarantined = pd.DataFrame(
        {"source_id": rows.loc[bad, "id"].astype("string"), "reason": reason[bad]}
    ).reset_index(drop=True)

    good = candidate & ~bad
    cycle = renewal[good].dt.strftime("%Y-%m-%d")
    step_rank = lead[good].astype(np.int64)
    subject_id = rows.loc[good, "id"].astype("string")
    due = pd.DataFrame(
        {
            "key": "renewal/" + subject_id + "/" + cycle + "/" + step_rank.astype("string") + "d",
            "subject_id": subject_id,
            "cycle": cycle,
            "step": step_rank.astype("string") + "d",
            "step_rank": step_rank,
            "recipient": rows.loc[good, "notify_email"].astype("string").str.strip(),
            "vendor": rows.loc[good, "vendor"].astype("string").str.strip(),
            "title": rows.loc[good, "title"].astype("string").fillna("").str.strip(),
            "amount": amount[good],
            "currency": rows.loc[good, "currency"].astype("string"),
            "renewal_date": renewal[good].dt.date,
            "days_left": days_left[good].astype(np.int64),
        }
    )
    handled_rank = pd.to_numeric(due.merge(
        history.astype({"subject_id": "string", "cycle": "string"}),
        on=["subject_id", "cycle"],
        how="left",
    )["handled_rank"]).to_numpy(dtype=float, na_value=np.nan)
    # Handled when this lead or a more urgent one of the cycle is already reserved.
    due["handled"] = ~np.isnan(handled_rank) & (handled_rank <= due["step_rank"].to_numpy())
    return Decision(due=due.reset_index(drop=True).loc[:, list(RENEWAL_COLUMNS)],
                    quarantined=quarantined)


DUNNING_STEPS = ("REMINDED_1", "REMINDED_2", "OVERDUE")
DUNNING_COLUMNS = (
    "key", "subject_id", "cycle", "step", "step_rank", "recipient", "previous_by", "handled",
    "number", "amount", "currency", "issue_date", "due_date", "client_id", "client_name",
    "client_email", "locale", "notes", "days_in_step",
)
SUPPORTED_LOCALES = ("en", "es")
_TRUE = ("1", "true", "t", "yes", "y")


def _truthy(values: pd.Series) -> pd.Series:
    """Booleans as stored by either database (True/1/'true'…); missing is False."""
    return values.astype("string").str.strip().str.lower().isin(_TRUE).fillna(False).astype(bool)


def business_dates(values: pd.Series, timezone: str) -> pd.Series:
    """Timestamps (naive ones taken as UTC) to their date in the business time zone."""
    stamps = pd.to_datetime(values.astype("string"), errors="coerce", utc=True, format="ISO8601")
    return stamps.dt.tz_convert(timezone).dt.tz_localize(None).dt.normalize()


def current_dunning_steps(history: pd.DataFrame) -> pd.DataFrame:
    """Per invoice, the last step reserved (highest step_rank) and its as_of date."""
    if history.empty:
        return pd.DataFrame({"current_rank": pd.Series(dtype="int64"),
                             "step_date": pd.Series(dtype="datetime64[us]")},
                            index=pd.Index([], dtype="string", name="subject_id"))
    ordered = history.assign(subject_id=history["subject_id"].astype("string"),
                             step_rank=pd.to_numeric(history["step_rank"])).sort_values(
        ["subject_id", "step_rank"])
    last = ordered.drop_duplicates("subject_id", keep="last").set_index("subject_id")
    return pd.DataFrame({"current_rank": last["step_rank"].astype("int64"),
                         "step_date": as_dates(last["as_of"])})


def due_dunning_steps(
    invoices: pd.DataFrame,
    clients: pd.DataFrame,
    history: pd.DataFrame,
    as_of: date,
    delays: Sequence[int] = (7, 5, 7),
    timezone: str = "UTC",
    escalation_to: str | None = None,
) -> Decision:
    """The next dunning step due per invoice on `as_of` (DESIGN.md, "Rules, exactly").

    invoices: id, client_id, number, amount, currency, status, sent_at, due_date
    [, paid_at]; clients: id, name, email, locale, notes, dunning_paused;
    history: subject_id, step_rank, as_of — the steps already reserved.
    `delays[k]` is the wait, in days, from step k (0 = SENT) to step k + 1.
    """
    if len(delays) != len(DUNNING_STEPS) or min(delays) < 1:
        # A zero delay would let a repeated run on the same day take the next step.
        raise ValueError(f"dunning delays must be three day counts >= 1, got {list(delays)!r}")
    rows = invoices.reset_index(drop=True).astype({"id": "string", "client_id": "string"})
    client = (clients.astype({"id": "string"}).drop_duplicates("id").set_index("id")
              .reindex(rows["client_id"]).reset_index(drop=True))
    client_found = rows["client_id"].isin(clients["id"].astype("string")).fillna(False)
    status = rows["status"].astype("string")
    paid = rows["paid_at"].notna() if "paid_at" in rows else pd.Series(False, index=rows.index)
    ended = status.isin(["draft", "paid", "void"]).fillna(False) | paid
    participating = ~ended & ~_truthy(client["dunning_paused"])

    sent_date = business_dates(rows["sent_at"], timezone)
    current = current_dunning_steps(history).reindex(rows["id"])
    rank = current["current_rank"].fillna(0).astype("int64").to_numpy()
    step_date = pd.Series(current["step_date"].to_numpy(), index=rows.index).where(rank > 0, sent_date)
    days_in_step = (pd.Timestamp(as_of) - step_date).dt.days
    wait = pd.Series(np.asarray([*delays, 0])[np.minimum(rank, len(delays))], index=rows.index)
    due = participating & (rank < len(DUNNING_STEPS)) & (days_in_step >= wait).fillna(False)
    overdue = due & (rank == len(DUNNING_STEPS) - 1)

    amount = as_amounts(rows["amount"])
    escalation_ok = escalation_to is not None and bool(
        valid_email(pd.Series([escalation_to])).iloc[0])
    reason = first_reason(
        [
            (status != "sent", "unknown status " + quote(status)),
            (~client_found, "client " + quote(rows["client_id"]) + " not found"),
            (~valid_email(client["email"]), "client email is not a valid address: "
             + quote(client["email"])),
            (sent_date.isna(), "sent_at missing or not a timestamp"),
            (amount.isna(), "amount missing or not a number"),
            (~known_currency(rows["currency"]), "unknown currency " + quote(rows["currency"])),
            (overdue & (not escalation_ok),
             "OVERDUE escalation needs DUEFLOW_ESCALATION_TO set to a valid address"),
        ],
        rows.index,
    ).where(participating)
    bad = reason.notna()
    quarantined = pd.DataFrame(
        {"source_id": rows.loc[bad, "id"], "reason": reason[bad]}
    ).reset_index(drop=True)

    good = due & ~bad
    next_rank = pd.Series(rank + 1, index=rows.index)[good]
    step = next_rank.map(lambda r: DUNNING_STEPS[r - 1]).astype("string")
    invoice_id = rows.loc[good, "id"]
    locale = client.loc[good, "locale"].astype("string").str.strip().str.lower()
    client_email = client.loc[good, "email"].astype("string").str.strip()
    decided = pd.DataFrame(
        {
            "key": "dunning/" + invoice_id + "/" + step,
            "subject_id": invoice_id,
            "cycle": "",
            "step": step,
            "step_rank": next_rank.astype("int64"),
            "recipient": client_email.where(step != "OVERDUE", escalation_to or ""),
            "previous_by": (pd.Timestamp(as_of) - pd.to_timedelta(wait[good], unit="D"))
            .dt.strftime("%Y-%m-%d"),
            "handled": False,
            "number": rows.loc[good, "number"].astype("string").fillna(invoice_id),
            "amount": amount[good],
            "currency": rows.loc[good, "currency"].astype("string"),
            "issue_date": sent_date[good].dt.date,
            "due_date": as_dates(rows.loc[good, "due_date"]).dt.date,
            "client_id": rows.loc[good, "client_id"],
            "client_name": client.loc[good, "name"].astype("string").fillna(""),
            "client_email": client_email,
            "locale": locale.where(locale.isin(SUPPORTED_LOCALES), "en"),
            "notes": client.loc[good, "notes"].astype("string").fillna(""),
            "days_in_step": days_in_step[good].astype("int64"),
        }
    )
    return Decision(due=decided.reset_index(drop=True).loc[:, list(DUNNING_COLUMNS)],
                    quarantined=quarantined)


def most_urgent_first(due: pd.DataFrame) -> pd.DataFrame:
    """Order due rows so that a send cap keeps the most urgent: renewals by lead then
    days left; dunning escalations first, then the longest waiting."""
    if "days_left" in due:
        return due.sort_values(["step_rank", "days_left", "key"], kind="stable")
    return due.sort_values(["step_rank", "days_in_step", "key"], ascending=[False, False, True],
                           kind="stable")
