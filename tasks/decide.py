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
    handled_rank = due.merge(
        history.astype({"subject_id": "string", "cycle": "string"}),
        on=["subject_id", "cycle"],
        how="left",
    )["handled_rank"].to_numpy(dtype=float)
    # Handled when this lead or a more urgent one of the cycle is already reserved.
    due["handled"] = ~np.isnan(handled_rank) & (handled_rank <= due["step_rank"].to_numpy())
    return Decision(due=due.reset_index(drop=True).loc[:, list(RENEWAL_COLUMNS)],
                    quarantined=quarantined)
