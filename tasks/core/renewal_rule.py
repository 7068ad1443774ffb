"""The renewal rule (docs/design.md, "The rules"): which contracts' owners are alerted on a
night, with which lead, and which contracts are quarantined and why (CONTRACT_REASONS).
Pure and vectorised: DataFrames and dates in, a Decision out."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import date, timedelta

import numpy as np

from dueflow.tasks.core.addresses import address_problems
from dueflow.tasks.core.calendar import BusinessCalendar
from dueflow.tasks.core.decide import (
    TEXT_LIMIT,
    Decision,
    closed_tonight,
    column_text,
    id_copies,
    lookback_start,
    quarantine_frame,
)
from dueflow.tasks.core.frames import pd
from dueflow.tasks.core.keys import id_problems, renewal_keys
from dueflow.tasks.core.money import amount_problems, known_currency
from dueflow.tasks.core.reasons import (
    Reason,
    blank,
    first_failing,
    holds_a_problem,
    is_false,
    is_not,
    missing,
    repeated,
    utf8_reasons,
)
from dueflow.tasks.core.statuses import CONTRACT_ACTIVE, CONTRACT_CANCELLED
from dueflow.tasks.core.text import VALID_UTF8, one_line, stripped
from dueflow.tasks.core.validate import business_dates

RENEWAL_COLUMNS = (
    "key", "subject_id", "cycle", "step", "step_rank", "recipient", "vendor", "title",
    "amount", "currency", "renewal_date", "days_left", "handled", "due_since",
)

# Why a contract cannot be alerted, most important first: a row is quarantined with the
# first it fails. The facts are those of reason_facts.
CONTRACT_REASONS = (
    Reason("id unusable", ("id",), holds_a_problem("id_problem"), "{id_problem}"),
    Reason("id repeated", ("id",), repeated("id_copies"), "id {id!r} appears {id_copies} times in contracts"),
    *utf8_reasons("contracts", ("vendor", "title", "amount", "currency", "renewal_date", "notify_email",
                                "status")),
    Reason("renewal_date unreadable", ("renewal_date",), missing("renewal"),
           "renewal_date missing or not a valid date"),
    Reason("status missing", ("status",), missing("status"), "status missing"),
    Reason("status unknown", ("status",), is_not("status", CONTRACT_ACTIVE), "unknown status {status!r}"),
    Reason("notify_email missing", ("notify_email",), missing("notify_email"), "notify_email missing"),
    Reason("notify_email invalid", ("notify_email",), holds_a_problem("email_problem"),
           "notify_email is not a valid address: {notify_email!r}: it {email_problem}"),
    Reason("currency unknown", ("currency",), is_false("currency_known"), "unknown currency {currency!r}"),
    Reason("amount unusable", ("amount", "currency"), holds_a_problem("amount_problem"), "{amount_problem}"),
    Reason("vendor missing", ("vendor",), blank("vendor_shown"), "vendor missing"),
)


def normalise_leads(leads: Sequence[int]) -> list[int]:
    """Leads sorted from most to least urgent; they must be distinct non-negative days."""
    cleaned = sorted({int(lead) for lead in leads})
    if not cleaned or cleaned[0] < 0:
        raise ValueError(f"renewal leads must be non-negative day counts, got {list(leads)!r}")
    return cleaned


def renewal_window(as_of: date, leads: Sequence[int],
                   calendar: BusinessCalendar | None = None) -> tuple[date, date]:
    """The renewal dates that can be due on `as_of`: [as_of, as_of + widest lead], from the
    day after the last business day when alerts wait for business days (`calendar`): a
    renewal that fell on the closed days just past still gets its most urgent alert."""
    return lookback_start(as_of, calendar), as_of + timedelta(days=max(normalise_leads(leads)))


def due_lead(days_left: np.ndarray, leads: Sequence[int]) -> np.ndarray:
    """The smallest lead L with 0 <= d <= L for each d, or -1 where nothing is due."""
    ordered = np.asarray(normalise_leads(leads))
    position = np.searchsorted(ordered, days_left, side="left")
    due = (days_left >= 0) & (position < len(ordered))
    return np.where(due, ordered[np.minimum(position, len(ordered) - 1)], -1)


def reason_facts(rows: pd.DataFrame, renewal: pd.Series, relevant: pd.Series) -> pd.DataFrame:
    """What CONTRACT_REASONS read: the source columns, ids, status and address as text, and
    what is read from them. An amount is read only where it matters (`relevant`)."""
    ids = column_text(rows, "id")
    email = column_text(rows, "notify_email")
    amount_problem = pd.Series(pd.NA, index=rows.index, dtype="string")
    amount_problem[relevant] = amount_problems(rows.loc[relevant, "amount"], rows.loc[relevant, "currency"],
                                               positive=False)
    facts = pd.DataFrame({str(c): v for c, v in rows.items()} | {
        "id": ids, "status": column_text(rows, "status"), "notify_email": email,  # as text
        "renewal": renewal, "id_problem": id_problems(ids), "id_copies": id_copies(ids),
        "email_problem": address_problems(email), "currency_known": known_currency(rows["currency"]),
        "amount_problem": amount_problem, "vendor_shown": one_line(rows["vendor"], TEXT_LIMIT)})
    facts.attrs[VALID_UTF8] = bool(rows.attrs.get(VALID_UTF8))
    return facts


def _renewal_rows(rows: pd.DataFrame, good: pd.Series, renewal: pd.Series, lead: pd.Series,
                  as_of: date) -> pd.DataFrame:
    """The facts of the good contracts' alerts, one row each, keys included."""
    cycle = renewal[good].dt.strftime("%Y-%m-%d")
    step_rank = lead[good].astype(np.int64)
    subject_id = rows.loc[good, "id"].astype("string")
    return pd.DataFrame(
        {
            "key": renewal_keys(subject_id, cycle, step_rank),
            "subject_id": subject_id,
            "cycle": cycle,
            "step": step_rank.astype("string") + "d",
            "step_rank": step_rank,
            "recipient": rows.loc[good, "notify_email"].astype("string"),
            "vendor": one_line(rows.loc[good, "vendor"], TEXT_LIMIT),
            "title": one_line(rows.loc[good, "title"], TEXT_LIMIT),
            "amount": stripped(rows.loc[good, "amount"]),
            "currency": rows.loc[good, "currency"].astype("string"),
            "renewal_date": renewal[good].dt.date,
            "days_left": (renewal[good] - pd.Timestamp(as_of)).dt.days.astype(np.int64),
            # The first night this alert was due (its lead's day, or the first day of the
            # catch-up window): a later night means closed days moved it (the forecast says).
            "due_since": (renewal[good] - pd.to_timedelta(step_rank, unit="D")).dt.date,
        }
    )


def _quarantined(rows: pd.DataFrame, reason: pd.Series) -> pd.DataFrame:
    return quarantine_frame(rows, reason, column_text(rows, "vendor"),
                            ("contract ", column_text(rows, "title"), ": "))


def due_renewal_alerts(
    contracts: pd.DataFrame,
    history: pd.DataFrame,
    as_of: date,
    leads: Sequence[int],
    calendar: BusinessCalendar | None = None,
    timezone: str = "UTC",
) -> Decision:
    """Renewal alerts due on `as_of` (docs/design.md, "The rules").

    contracts: id, vendor, title, amount, currency, renewal_date, notify_email, status.
    history: subject_id, cycle, handled_rank — the most urgent lead already reserved
    per contract and cycle (cycle = renewal date as YYYY-MM-DD).
    `calendar`: alerts wait for business days (None: every day, `renewal_on_any_day`). On a
    closed day nothing is due; on the next business day, a renewal that fell on the closed
    days just past counts as renewing today (its most urgent lead, once). `timezone`: the
    business zone a renewal date written with an offset is read in.
    """
    rows = contracts.reset_index(drop=True)
    cancelled = (column_text(rows, "status") == CONTRACT_CANCELLED).fillna(False).astype(bool)
    renewal = business_dates(rows["renewal_date"], timezone)
    days_left = (renewal - pd.Timestamp(as_of)).dt.days
    caught_up = (renewal >= pd.Timestamp(lookback_start(as_of, calendar))) & (days_left < 0)
    lead = pd.Series(
        due_lead(days_left.mask(caught_up, 0).fillna(-1).to_numpy(dtype=np.int64), leads), index=rows.index
    ).where(renewal.notna(), -1)
    if closed_tonight(as_of, calendar):
        lead[:] = -1

    candidate = (lead >= 0) & ~cancelled
    relevant = (renewal.isna() & ~cancelled) | candidate
    reason = first_failing(CONTRACT_REASONS, reason_facts(rows, renewal, relevant), among=relevant)
    good = candidate & reason.isna()
    due = _renewal_rows(rows, good, renewal, lead, as_of)
    handled_rank = pd.to_numeric(due.merge(
        history.astype({"subject_id": "string", "cycle": "string"}),
        on=["subject_id", "cycle"],
        how="left",
    )["handled_rank"]).to_numpy(dtype=float, na_value=np.nan)
    # Handled when this lead or a more urgent one of the cycle is already reserved.
    due["handled"] = ~np.isnan(handled_rank) & (handled_rank <= due["step_rank"].to_numpy())
    return Decision(due=due.reset_index(drop=True).loc[:, list(RENEWAL_COLUMNS)],
                    quarantined=_quarantined(rows, reason))


def settled_apart(contracts: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Split extracted contracts (sql/extract_contracts) into the rows to decide and the
    due rows the ledger already settles (`settled_lead` set: their tonight's lead)."""
    if "settled_lead" not in contracts:
        return contracts, contracts.iloc[0:0]
    settled = contracts["settled_lead"].notna()
    return contracts.loc[~settled].drop(columns="settled_lead"), contracts.loc[settled]


def with_settled(decision: Decision, settled: pd.DataFrame, as_of: date, timezone: str = "UTC") -> Decision:
    """`decision` plus the settled rows as due and handled (their key, recipient and dates:
    what the summary reports of a handled row)."""
    if settled.empty:
        return decision
    renewal = business_dates(settled["renewal_date"], timezone)
    subject_id = settled["id"].astype("string").reset_index(drop=True)
    cycle = renewal.dt.strftime("%Y-%m-%d").astype("string").reset_index(drop=True)
    step_rank = pd.to_numeric(settled["settled_lead"]).astype(np.int64).reset_index(drop=True)
    handled = pd.DataFrame({
        "key": renewal_keys(subject_id, cycle, step_rank), "subject_id": subject_id, "cycle": cycle,
        "step": step_rank.astype("string") + "d", "step_rank": step_rank,
        "recipient": settled["notify_email"].astype("string").reset_index(drop=True),
        "renewal_date": renewal.dt.date.reset_index(drop=True),
        "days_left": (renewal - pd.Timestamp(as_of)).dt.days.astype(np.int64).reset_index(drop=True),
        "handled": True,
    }).reindex(columns=list(RENEWAL_COLUMNS))
    due = pd.concat([decision.due, handled], ignore_index=True) if len(decision.due) else handled
    return Decision(due=due, quarantined=decision.quarantined)


NO_LONGER_RENEWS = "the contract no longer renews on this date"


def renewal_alerts_for(contracts: pd.DataFrame, keys: pd.DataFrame, as_of: date,
                       timezone: str = "UTC") -> Decision:
    """The facts of renewal alerts already in the ledger (`keys`: key, subject_id, cycle,
    step_rank) from their contracts as they are now: to render a reserved alert that
    was never stored. A key whose contract is gone, bad, or renews on another date is
    quarantined with the reason, keyed by the ledger key."""
    rows = contracts.reset_index(drop=True)
    renewal = business_dates(rows["renewal_date"], timezone)
    every = pd.Series(True, index=rows.index)
    reason = first_failing(CONTRACT_REASONS, reason_facts(rows, renewal, every))
    facts = _renewal_rows(rows, reason.isna(), renewal, pd.Series(0, index=rows.index), as_of)
    facts = facts.drop(columns=["key", "step", "step_rank"])
    wanted = keys.loc[:, ["key", "subject_id", "cycle", "step_rank"]].astype(
        {"subject_id": "string", "cycle": "string"})
    merged = wanted.merge(facts, on=["subject_id", "cycle"], how="left", indicator=True)
    found = merged["_merge"] == "both"
    # A missing key's reason: its contract's, when the contract is there and bad (every row
    # of an id has the same reason: the id's own checks come first); otherwise it no longer
    # renews on the key's date.
    by_id = pd.Series(reason.to_numpy(), index=column_text(rows, "id"), dtype="string")
    by_id = by_id[~by_id.index.duplicated(keep="last") & by_id.index.notna()]
    missing_keys = merged.loc[~found, ["key", "subject_id"]]
    why = missing_keys["subject_id"].map(by_id).astype("string").fillna(NO_LONGER_RENEWS)
    merged["step"] = merged["step_rank"].astype("int64").astype("string") + "d"
    merged["handled"] = False
    return Decision(due=merged.loc[found, list(RENEWAL_COLUMNS)].reset_index(drop=True),
                    quarantined=pd.DataFrame({"source_id": missing_keys["key"],
                                              "reason": why}).reset_index(drop=True))
