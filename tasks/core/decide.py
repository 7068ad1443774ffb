"""Decisions: pure, vectorised functions of DataFrames and dates. No I/O, no row loops.

Every source row the run extracted ends in exactly one place: due (then sent, or already
handled), quarantined with a reason (G6), or not due tonight. Comparisons are NULL-safe
by construction: a missing or unexpected value is a reason, never a silent "no".
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date, timedelta
from decimal import Decimal

import numpy as np

from dueflow.tasks.core.addresses import address_problems, valid_email
from dueflow.tasks.core.calendar import BusinessCalendar
from dueflow.tasks.core.frames import pd
from dueflow.tasks.core.keys import (
    CLIENT_STEPS,
    DUNNING_STEPS,
    DunningStep,
    dunning_keys,
    id_problems,
    printable_ids,
    renewal_keys,
)
from dueflow.tasks.core.locales import SUPPORTED_LOCALES
from dueflow.tasks.core.money import amount_problems, below_minimum, known_currency
from dueflow.tasks.core.parameters import DunningStart  # checked there, once (dunning_start_of)
from dueflow.tasks.core.profiles import Profiles, default_profile
from dueflow.tasks.core.statuses import (
    CONTRACT_ACTIVE,
    CONTRACT_CANCELLED,
    INVOICE_DUNNED,
    INVOICE_ENDED,
    STEP_DONE,
    LedgerStatus,
)
from dueflow.tasks.core.text import VALID_UTF8, invalid_utf8, lowered, one_line, stripped
from dueflow.tasks.core.validate import as_dates, business_dates, first_reason, flag_values, quote

TEXT_LIMIT = 200  # characters of a name, title or number shown in an email

RENEWAL_COLUMNS = (
    "key", "subject_id", "cycle", "step", "step_rank", "recipient", "vendor", "title",
    "amount", "currency", "renewal_date", "days_left", "handled", "due_since",
)
DUNNING_COLUMNS = (
    "key", "subject_id", "cycle", "step", "step_rank", "recipient", "previous_by", "handled",
    "number", "amount", "currency", "issue_date", "due_date", "client_id", "client_name",
    "client_email", "locale", "notes", "days_in_step", "cc_recipient", "pdf_path", "due_since",
)
SKIPPED_COLUMNS = ("source_id", "reason")


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
    skipped: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(
        {c: pd.Series(dtype="string") for c in SKIPPED_COLUMNS}))

    @property
    def to_reserve(self) -> pd.DataFrame:
        return self.due.loc[~self.due["handled"]]


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


def lookback_start(as_of: date, calendar: BusinessCalendar | None) -> date:
    """The first day whose due emails go out on `as_of`: the day after the last business day
    before it (as_of itself without a calendar, or when yesterday was open)."""
    if calendar is None or not calendar.active:
        return as_of
    return calendar.previous_open(as_of) + timedelta(days=1)


def closed_tonight(as_of: date, calendar: BusinessCalendar | None) -> bool:
    return calendar is not None and calendar.active and not calendar.is_open(as_of)


def due_lead(days_left: np.ndarray, leads: Sequence[int]) -> np.ndarray:
    """The smallest lead L with 0 <= d <= L for each d, or -1 where nothing is due."""
    ordered = np.asarray(normalise_leads(leads))
    position = np.searchsorted(ordered, days_left, side="left")
    due = (days_left >= 0) & (position < len(ordered))
    return np.where(due, ordered[np.minimum(position, len(ordered) - 1)], -1)


def _text(rows: pd.DataFrame, column: str) -> pd.Series:
    return rows[column].astype("string") if column in rows else pd.Series(
        pd.NA, index=rows.index, dtype="string")


def _duplicates(ids: pd.Series) -> pd.Series:
    """How many rows share each row's id (1 for a unique id; missing ids count apart)."""
    counts = ids.map(ids.value_counts(dropna=True))
    return counts.fillna(1).astype(np.int64)


def _utf8_checks(rows: pd.DataFrame, columns: Sequence[str], table: str) -> list:
    if rows.attrs.get(VALID_UTF8):
        return []
    return [(invalid_utf8(rows[c]), f"{table}.{c} is not valid UTF-8") for c in columns if c in rows]


def _contract_reasons(rows: pd.DataFrame, renewal: pd.Series, relevant: pd.Series) -> pd.Series:
    """Why each relevant contract cannot be alerted (NA where it can)."""
    status = _text(rows, "status")
    email = _text(rows, "notify_email")
    email_problem = address_problems(email)
    ids = _text(rows, "id")
    copies = _duplicates(ids)
    amounts = pd.Series(pd.NA, index=rows.index, dtype="string")
    amounts[relevant] = amount_problems(rows.loc[relevant, "amount"], rows.loc[relevant, "currency"],
                                        positive=False)
    return first_reason(
        [
            (id_problems(ids).notna(), lambda i: id_problems(ids[i])),
            (copies > 1, lambda i: "id " + quote(ids[i]) + " appears " + copies[i].astype("string")
             + " times in contracts"),
            *_utf8_checks(rows, ("vendor", "title", "amount", "currency", "renewal_date",
                                 "notify_email", "status"), "contracts"),
            (renewal.isna(), "renewal_date missing or not a valid date"),
            (status.isna(), "status missing"),
            (status != CONTRACT_ACTIVE, lambda i: "unknown status " + quote(status[i])),
            (email.isna(), "notify_email missing"),
            (email_problem.notna(), lambda i: "notify_email is not a valid address: " + quote(email[i])
             + ": it " + email_problem[i]),
            (~known_currency(rows["currency"]), lambda i: "unknown currency " + quote(rows["currency"][i])),
            (amounts.notna(), lambda i: amounts[i]),
            (one_line(rows["vendor"], TEXT_LIMIT) == "", "vendor missing"),
        ],
        rows.index,
    ).where(relevant)


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


def _quarantine_frame(rows: pd.DataFrame, reason: pd.Series, party: pd.Series | None = None,
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
    cancelled = (_text(rows, "status") == CONTRACT_CANCELLED).fillna(False).astype(bool)
    renewal = business_dates(rows["renewal_date"], timezone)
    days_left = (renewal - pd.Timestamp(as_of)).dt.days
    caught_up = (renewal >= pd.Timestamp(lookback_start(as_of, calendar))) & (days_left < 0)
    lead = pd.Series(
        due_lead(days_left.mask(caught_up, 0).fillna(-1).to_numpy(dtype=np.int64), leads), index=rows.index
    ).where(renewal.notna(), -1)
    if closed_tonight(as_of, calendar):
        lead[:] = -1

    candidate = (lead >= 0) & ~cancelled
    reason = _contract_reasons(rows, renewal, (renewal.isna() & ~cancelled) | candidate)
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
                    quarantined=_quarantine_frame(rows, reason, _text(rows, "vendor"),
                                                  ("contract ", _text(rows, "title"), ": ")))


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


def renewal_alerts_for(contracts: pd.DataFrame, keys: pd.DataFrame, as_of: date,
                       timezone: str = "UTC") -> Decision:
    """The facts of renewal alerts already in the ledger (`keys`: key, subject_id, cycle,
    step_rank) from their contracts as they are now: to render a reserved alert that
    was never stored. A key whose contract is gone, bad, or renews on another date is
    quarantined with the reason, keyed by the ledger key."""
    rows = contracts.reset_index(drop=True)
    renewal = business_dates(rows["renewal_date"], timezone)
    reason = _contract_reasons(rows, renewal, pd.Series(True, index=rows.index))
    facts = _renewal_rows(rows, reason.isna(), renewal, pd.Series(0, index=rows.index), as_of)
    facts = facts.drop(columns=["key", "step", "step_rank"])
    wanted = keys.loc[:, ["key", "subject_id", "cycle", "step_rank"]].astype(
        {"subject_id": "string", "cycle": "string"})
    merged = wanted.merge(facts, on=["subject_id", "cycle"], how="left", indicator=True)
    found = merged["_merge"] == "both"
    by_id = dict(zip(rows["id"].astype("string"), reason, strict=True))
    missing = merged.loc[~found, ["key", "subject_id"]]
    why = missing["subject_id"].map(lambda s: by_id.get(s) if isinstance(by_id.get(s), str)
                                    else "the contract no longer renews on this date")
    merged["step"] = merged["step_rank"].astype("int64").astype("string") + "d"
    merged["handled"] = False
    return Decision(due=merged.loc[found, list(RENEWAL_COLUMNS)].reset_index(drop=True),
                    quarantined=pd.DataFrame({"source_id": missing["key"], "reason": why.fillna(
                        "the contract no longer renews on this date")}).reset_index(drop=True))


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


def _client_of(rows: pd.DataFrame, clients: pd.DataFrame) -> tuple[pd.DataFrame, pd.Series, pd.Series]:
    """Each invoice's client row (first of duplicates), whether it was found, and how many
    client rows share its id."""
    ids = clients["id"].astype("string")
    unique = clients.assign(id=ids).drop_duplicates("id").set_index("id")
    client_id = rows["client_id"].astype("string")
    client = unique.reindex(client_id).reset_index(drop=True)
    client.index = rows.index
    found = client_id.isin(ids.dropna()).fillna(False).astype(bool)
    copies = client_id.map(ids.value_counts(dropna=True)).fillna(0).astype(np.int64)
    return client, found, copies


@dataclass(frozen=True)
class DunningRules:
    """What shapes dunning beyond the run's parameters (all optional; the defaults change
    nothing): the named profiles clients choose, the business-day calendar, the minimum
    open amount per currency."""

    profiles: Profiles | None = None  # None: the run's parameters for every client
    calendar: BusinessCalendar | None = None
    minimums: Mapping[str, Decimal] = field(default_factory=dict)


@dataclass(frozen=True)
class _Invoices:
    """Invoices with their clients, checked: the part of dunning that does not depend on
    the ledger. `reason` is NA where a row can be dunned."""

    rows: pd.DataFrame
    client: pd.DataFrame
    participating: pd.Series  # not ended, client not paused, not held tonight
    sent_date: pd.Series
    due_date: pd.Series
    start_date: pd.Series
    reason: pd.Series
    profile: pd.DataFrame  # per row: d1, d2, d3, start, last_rank, unit, escalation_to
    hold_end: pd.Series  # the day the invoice's hold or its client's pause ends (NaT: none)


def _ended(rows: pd.DataFrame) -> pd.Series:
    """Invoices that take no part in dunning: paid, or in a status that ends it."""
    paid = rows["paid_at"].notna() if "paid_at" in rows else pd.Series(False, index=rows.index)
    return _text(rows, "status").isin(INVOICE_ENDED).fillna(False).astype(bool) | paid


def _start_dates(rows: pd.DataFrame, timezone: str) -> tuple[pd.Series, pd.Series]:
    """Each invoice's sent date (business zone) and due date."""
    return business_dates(rows["sent_at"], timezone), business_dates(rows["due_date"], timezone)


def _given(frame: pd.DataFrame, column: str) -> pd.Series:
    """Where a column holds something (not NULL, not blank)."""
    return stripped(_text(frame, column)).replace("", pd.NA).notna().astype(bool)


def _optional_dates(frame: pd.DataFrame, column: str, timezone: str) -> tuple[pd.Series, pd.Series]:
    """An optional date column: its dates (NaT where empty) and where it holds something
    that is not a date (quarantined: a hold we cannot read is not ignored)."""
    text = stripped(_text(frame, column)).replace("", pd.NA)
    dates = business_dates(text, timezone)
    return dates, (text.notna() & dates.isna()).astype(bool)


def _hold_ends(rows: pd.DataFrame, client: pd.DataFrame, client_copies: pd.Series, timezone: str
               ) -> tuple[pd.Series, pd.Series, pd.Series, pd.Series]:
    """Holds with an end, per invoice: the invoice's own (Mahnstopp, dunning_hold_until) and
    its client's pause (dunning_paused_until; only a client row that is the only one with its
    id counts), NaT where none; and where each holds something that is not a date (the
    invoice is quarantined: a hold we cannot read is not ignored). Held while the later end
    is after tonight."""
    hold, bad_hold = _optional_dates(rows, "dunning_hold_until", timezone)
    pause_end, bad_pause = _optional_dates(client, "dunning_paused_until", timezone)
    return hold, pause_end.where(client_copies == 1), bad_hold, bad_pause


def hold_ends(invoices: pd.DataFrame, clients: pd.DataFrame, timezone: str) -> tuple[pd.Series, pd.Series]:
    """Each invoice's hold end and its client's pause end as the decision reads them (NaT:
    none), aligned with the rows in order (a fresh RangeIndex)."""
    rows = invoices.reset_index(drop=True)
    client, _, copies = _client_of(rows, clients)
    hold, pause_end, _, _ = _hold_ends(rows, client, copies, timezone)
    return hold, pause_end


def _profiles_of(client: pd.DataFrame, profiles: Profiles) -> tuple[pd.DataFrame, pd.Series, pd.Series]:
    """Each row's profile (its client's `dunning_profile`, the default when absent or blank),
    the name asked for, and where that name is unknown."""
    asked = stripped(_text(client, "dunning_profile")).fillna("")
    table = profiles.frame()
    known = asked.isin(table.index)
    chosen = table.reindex(asked.where(known, "")).reset_index(drop=True)
    chosen.index = client.index
    return chosen, asked, ~known


def _invoices(invoices: pd.DataFrame, clients: pd.DataFrame, timezone: str, profiles: Profiles,
              as_of: date | None,
              relevant: Callable[[pd.Series, pd.Series, pd.DataFrame, pd.Series], pd.Series]
              = lambda participating, *_: participating) -> _Invoices:
    """`relevant(participating, start_date, profile, hold_end)`: the rows whose reasons are
    checked. `as_of` None: nothing is held (a ledger row decided again)."""
    rows = invoices.reset_index(drop=True)
    sent_date, due_date = _start_dates(rows, timezone)
    ids = _text(rows, "id")
    client, client_found, client_copies = _client_of(rows, clients)
    profile, asked, unknown_profile = _profiles_of(client, profiles)
    by_sent = (profile["start"] == "sent").to_numpy()
    start_date = sent_date.where(by_sent, due_date)
    status = _text(rows, "status")
    ended = _ended(rows)
    paused = flag_values(client["dunning_paused"])
    hold, pause_end, bad_hold, bad_pause = _hold_ends(rows, client, client_copies, timezone)
    hold_end = pd.concat([hold, pause_end], axis=1).max(axis=1)
    held = ((hold_end > pd.Timestamp(as_of)) if as_of is not None
            else pd.Series(False, index=rows.index)).fillna(False).astype(bool)
    # A client row counts only if it is the only one with its id: an invoice whose client
    # is duplicated takes part, and is quarantined, whichever copy says "paused".
    participating = ~ended & ~(paused.fillna(False).astype(bool) & (client_copies == 1)) & ~held
    checked = relevant(participating, start_date, profile, hold_end)
    client_id = _text(rows, "client_id")
    client_email = client["email"].astype("string")
    client_email_problem = address_problems(client_email)
    # The account manager's copy (optional): absent or blank is none; anything else must
    # be one address, or the row is quarantined — a bad one never reaches a header (G6).
    cc_email = _text(client, "cc_email")
    cc_given = (cc_email.str.strip() != "").fillna(False).astype(bool)
    cc_problem = address_problems(cc_email.str.strip()).where(cc_given)
    copies = _duplicates(ids)
    amounts = pd.Series(pd.NA, index=rows.index, dtype="string")
    amounts[checked] = amount_problems(rows.loc[checked, "amount"], rows.loc[checked, "currency"],
                                       positive=True)
    reason = first_reason(
        [
            (id_problems(ids).notna(), lambda i: id_problems(ids[i])),
            (copies > 1, lambda i: "id " + quote(ids[i]) + " appears " + copies[i].astype("string")
             + " times in invoices"),
            *_utf8_checks(rows, ("client_id", "number", "amount", "currency", "status", "sent_at",
                                 "due_date", "dunning_hold_until"), "invoices"),
            (status.isna(), "status missing"),
            (status != INVOICE_DUNNED, lambda i: "unknown status " + quote(status[i])),
            (client_id.isna(), "client_id missing"),
            (~client_found, lambda i: "client " + quote(client_id[i]) + " not found"),
            (client_copies > 1, lambda i: "client " + quote(client_id[i]) + " appears "
             + client_copies[i].astype("string") + " times in clients"),
            *_utf8_checks(client, ("name", "email", "locale", "notes", "dunning_paused", "cc_email",
                                   "dunning_paused_until", "dunning_profile"), "clients"),
            (paused.isna(), lambda i: "client dunning_paused is neither true nor false: "
             + quote(client["dunning_paused"][i])),
            (bad_hold, lambda i: "dunning_hold_until is not a date: " + quote(rows["dunning_hold_until"][i])),
            (bad_pause, lambda i: "client dunning_paused_until is not a date: "
             + quote(client["dunning_paused_until"][i])),
            (unknown_profile, lambda i: "client dunning_profile " + quote(asked[i])
             + " is not a known profile (DUEFLOW_PROFILES_FILE)"),
            (client_email_problem.notna(), lambda i: "client email is not a valid address: "
             + quote(client_email[i]) + ": it " + client_email_problem[i]),
            (cc_problem.notna(), lambda i: "client cc_email is not a valid address: "
             + quote(cc_email[i]) + ": it " + cc_problem[i]),
            (start_date.isna() & by_sent, "sent_at missing or not a valid timestamp"),
            (start_date.isna(), "due_date missing or not a valid date"),
            # Counted from sent_at, an invoice may have no due date (its emails say none);
            # one that holds something else is not read as "none" (G6).
            (due_date.isna() & _given(rows, "due_date"), lambda i: "due_date is not a date: "
             + quote(rows["due_date"][i])),
            (~known_currency(rows["currency"]), lambda i: "unknown currency " + quote(rows["currency"][i])),
            (amounts.notna(), lambda i: amounts[i]),
        ],
        rows.index,
    ).where(checked)
    return _Invoices(rows, client, participating, sent_date, due_date, start_date, reason, profile,
                     hold_end)


def _dunning_rows(inv: _Invoices, good: pd.Series, step: pd.Series, escalation_to: pd.Series,
                  previous_by: pd.Series, days_in_step: pd.Series, due_since: pd.Series) -> pd.DataFrame:
    """The facts of the good invoices' steps, one row each, keys included."""
    rows, client = inv.rows, inv.client
    invoice_id = rows.loc[good, "id"].astype("string")
    step = step[good].astype("string")
    locale = lowered(client.loc[good, "locale"])
    emails = stripped(client.loc[good, "email"])
    cc = stripped(_text(client, "cc_email")[good]).replace("", pd.NA)
    # Only a reminder to the client is copied to its account manager (docs/emails.md), and
    # not to the client's own address again.
    cc = cc.where(step.isin(CLIENT_STEPS) & (cc.str.lower() != emails.str.lower()).fillna(True))
    return pd.DataFrame(
        {
            "key": dunning_keys(invoice_id, step),
            "subject_id": invoice_id,
            "cycle": "",
            "step": step,
            "step_rank": step.map({s.value: s.rank for s in DUNNING_STEPS}).astype("int64"),
            "recipient": emails.where(step.isin(CLIENT_STEPS), escalation_to[good].fillna("")),
            "previous_by": previous_by[good],
            "handled": False,
            "number": one_line(rows.loc[good, "number"].astype("string").fillna(invoice_id), TEXT_LIMIT),
            "amount": stripped(rows.loc[good, "amount"]),
            "currency": rows.loc[good, "currency"].astype("string"),
            "issue_date": inv.sent_date[good].dt.date,
            "due_date": inv.due_date[good].dt.date,
            "client_id": one_line(rows.loc[good, "client_id"], TEXT_LIMIT),
            "client_name": one_line(client.loc[good, "name"], TEXT_LIMIT),
            "client_email": emails,
            "locale": locale.where(locale.isin(SUPPORTED_LOCALES), "en").fillna("en"),
            "notes": client.loc[good, "notes"].astype("string").fillna(""),
            "days_in_step": days_in_step[good].astype("int64"),
            "cc_recipient": cc,
            "pdf_path": _text(rows, "pdf_path")[good],
            "due_since": due_since[good].dt.date,
        }
    )


@dataclass(frozen=True)
class _Steps:
    """Each invoice's last step in the ledger (rank 0: none yet), whether it is done, the
    date it got out, and the wait before the next one."""

    rank: np.ndarray
    done: np.ndarray
    step_date: pd.Series  # NaT where rank is 0 (the start date dates SENT)
    wait: pd.Series
    bounced: np.ndarray  # the last step bounced (a step still to come): the escalation is next


def _steps_of(rows: pd.DataFrame, history: pd.DataFrame, delays: Sequence[int] | pd.DataFrame,
              current: pd.DataFrame | None = None) -> _Steps:
    """`delays`: the three waits for every row, or per row (columns d1, d2, d3); `current`:
    current_dunning_steps(history) aligned with the rows, when the caller has it already."""
    if current is None:
        current = current_dunning_steps(history).reindex(_text(rows, "id"))
    rank = current["current_rank"].fillna(0).astype("int64").to_numpy()
    if isinstance(delays, pd.DataFrame):
        table = np.column_stack([delays[["d1", "d2", "d3"]].to_numpy(dtype=np.int64),
                                 np.zeros(len(rows), dtype=np.int64)])
        wait = table[np.arange(len(rows)), np.minimum(rank, len(DUNNING_STEPS))]
    else:
        wait = np.asarray([*delays, 0])[np.minimum(rank, len(delays))]
    return _Steps(rank=rank,
                  done=current["step_done"].fillna(True).astype(bool).to_numpy(),  # SENT is always done
                  step_date=pd.Series(current["step_date"].to_numpy(), index=rows.index),
                  wait=pd.Series(wait, index=rows.index),
                  bounced=current["step_bounced"].fillna(False).astype(bool).to_numpy()
                  & (rank < len(DUNNING_STEPS)))


def _days_in_step(steps: _Steps, start_date: pd.Series, as_of: date) -> pd.Series:
    return (pd.Timestamp(as_of) - steps.step_date.where(steps.rank > 0, start_date)).dt.days


def _may_be_due(steps: _Steps, days_in_step: pd.Series) -> pd.Series:
    """The next step's wait is over (or the step's date is unreadable: quarantined)."""
    return pd.Series(steps.rank < len(DUNNING_STEPS), index=days_in_step.index) & (
        (days_in_step >= steps.wait) | days_in_step.isna()).astype(bool)


def dunning_may_be_due(invoices: pd.DataFrame, history: pd.DataFrame, as_of: date,
                       delays: Sequence[int] = (7, 5, 7), timezone: str = "UTC",
                       start: DunningStart = "sent") -> pd.Series:
    """The invoices whose next dunning step may be due on `as_of` — not ended, a step still
    to come, its wait over or its start unreadable — whatever their client says (paused or
    not) and whether or not the row is valid: the exact rule that sql/dunning_candidates
    applies with a margin (a night reads no other open invoice). Aligned with the rows in
    order (a fresh RangeIndex). An invoice held tonight (its own dunning_hold_until after
    `as_of`) is not. A hold that ended, business days, a client's pause and a profile's own
    start and longer delays only make a step later, never earlier: this stays the bound (with
    the shortest delays of every profile)."""
    rows = invoices.reset_index(drop=True)
    sent_date, due_date = _start_dates(rows, timezone)
    steps = _steps_of(rows, history, delays)
    start_date = sent_date if start == "sent" else due_date
    held = (_optional_dates(rows, "dunning_hold_until", timezone)[0] > pd.Timestamp(as_of)
            ).fillna(False).astype(bool)
    return (~_ended(rows) & ~held & _may_be_due(steps, _days_in_step(steps, start_date, as_of))).astype(bool)


ESCALATION_NEEDED = "OVERDUE escalation needs DUEFLOW_ESCALATION_TO set to a valid address"


def _escalations(profile: pd.DataFrame, escalation_to: str | None) -> tuple[pd.Series, pd.Series]:
    """Each row's escalation address (its profile's, else DUEFLOW_ESCALATION_TO) and whether
    it is usable."""
    address = profile["escalation_to"].astype("string").fillna(escalation_to if escalation_to else pd.NA)
    usable = valid_email(address.fillna("")) & address.notna()
    return address, usable.astype(bool)


def _elapsed(anchor: pd.Series, unit: pd.Series, as_of: date, calendar: BusinessCalendar | None
             ) -> pd.Series:
    """Days since `anchor` on `as_of`, in each row's unit: calendar days, or the business
    days in (anchor, as_of] (every day is one without a calendar)."""
    days = (pd.Timestamp(as_of) - anchor).dt.days.astype("float64")
    business = (unit == "business").to_numpy()
    if calendar is None or not calendar.active or not business.any():
        return days
    return days.where(~business, calendar.business_days_since(anchor, as_of))


def _due_since(anchor: pd.Series, wait: pd.Series, unit: pd.Series, calendar: BusinessCalendar | None
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


def due_dunning_steps(
    invoices: pd.DataFrame,
    clients: pd.DataFrame,
    history: pd.DataFrame,
    as_of: date,
    delays: Sequence[int] = (7, 5, 7),
    timezone: str = "UTC",
    escalation_to: str | None = None,
    start: DunningStart = "sent",
    rules: DunningRules | None = None,
) -> Decision:
    """The next dunning step due per invoice on `as_of` (docs/design.md, "The rules").

    invoices: id, client_id, number, amount, currency, status, sent_at, due_date
    [, paid_at, dunning_hold_until]; clients: id, name, email, locale, notes, dunning_paused
    [, dunning_paused_until, dunning_profile]; history: subject_id, step_rank, as_of,
    attempt_as_of, status — the steps in the ledger.
    `delays[k]` is the wait, in days, from step k (0 = SENT) to step k + 1; SENT is dated
    by `sent_at` (`start="sent"`) or by `due_date` (`start="due"`). A step that is not
    sent (or adopted) holds the invoice: no later step is due while it is pending or failed;
    after a bounced reminder, only the escalation is (the client could not be reached).
    `rules`: a client's profile replaces delays, start, last step, unit and escalation
    address; a hold or pause moves the date the wait counts from to the day it ends; on a
    closed day of the calendar nothing is due (it is the next business day); an invoice
    below its currency's minimum is skipped.
    """
    if len(delays) != len(DUNNING_STEPS) or min(delays) < 1:
        # A zero delay would let a repeated run on the same day take the next step.
        raise ValueError(f"dunning delays must be three day counts >= 1, got {list(delays)!r}")
    rules = rules or DunningRules()
    profiles = rules.profiles or default_profile(tuple(delays), start)
    calendar = rules.calendar
    plain = invoices.reset_index(drop=True)
    history_steps = current_dunning_steps(history).reindex(_text(plain, "id"))
    rank = history_steps["current_rank"].fillna(0).astype("int64").to_numpy()
    step_date = pd.Series(history_steps["step_date"].to_numpy(), index=plain.index)

    def anchor_of(start_date: pd.Series, hold_end: pd.Series) -> pd.Series:
        # The day the wait counts from: the last step's (or the start), or the end of a hold
        # that ends later — the clock does not run while an invoice is held.
        anchor = step_date.where(rank > 0, start_date)
        return anchor.where(~(hold_end > anchor).fillna(False).astype(bool), hold_end)

    def may_be_due(participating: pd.Series, start_date: pd.Series, profile: pd.DataFrame,
                   hold_end: pd.Series) -> pd.Series:
        steps = _steps_of(plain, history, profile, history_steps)
        elapsed = _elapsed(anchor_of(start_date, hold_end), profile["unit"], as_of, calendar)
        return participating & _may_be_due(steps, elapsed)

    # Reasons are checked only for the rows whose next step may be due tonight (or whose
    # start is unreadable): the rows sql/dunning_candidates reads, whatever else is given.
    inv = _invoices(invoices, clients, timezone, profiles, as_of, relevant=may_be_due)
    rows = inv.rows
    steps = _steps_of(rows, history, inv.profile, history_steps)
    done, wait, bounced = steps.done, steps.wait, steps.bounced
    anchor = anchor_of(inv.start_date, inv.hold_end)
    elapsed = _elapsed(anchor, inv.profile["unit"], as_of, calendar)
    days_in_step = (pd.Timestamp(as_of) - anchor).dt.days
    next_rank = np.where(bounced, len(DUNNING_STEPS), rank + 1)
    # A client step that bounced: the client cannot be reached, so no later reminder goes
    # out; when the next step would be due, the escalation is, in its place. A profile's
    # last step ends its invoice's dunning there.
    due = (inv.participating & (rank < len(DUNNING_STEPS)) & (done | bounced)
           & (next_rank <= inv.profile["last_rank"].to_numpy())
           & (elapsed >= wait).fillna(False).astype(bool))
    if closed_tonight(as_of, calendar):
        due &= False  # a closed day: what falls due goes out on the next business day
    overdue = due & (next_rank == len(DUNNING_STEPS))
    escalation, usable = _escalations(inv.profile, escalation_to)
    reason = inv.reason.mask(inv.reason.isna() & overdue & ~usable, ESCALATION_NEEDED)

    good = due & reason.isna()
    below = below_minimum(rows["amount"], rows["currency"], dict(rules.minimums)) & good
    skipped = pd.DataFrame({
        "source_id": printable_ids(rows.loc[below, "id"]),
        "reason": ("open amount " + stripped(rows.loc[below, "amount"]) + " "
                   + rows.loc[below, "currency"].astype("string") + " is below the minimum "
                   + rows.loc[below, "currency"].astype("string").map(
                       {c: str(m) for c, m in rules.minimums.items()}).astype("string")
                   + " (DUEFLOW_DUNNING_MINIMUM)"),
    }).reset_index(drop=True).astype("string")
    good &= ~below
    step = pd.Series(np.asarray([s.value for s in DUNNING_STEPS], dtype=object)[
        np.minimum(next_rank, len(DUNNING_STEPS)) - 1], index=rows.index, dtype="string")
    previous_by = (pd.Timestamp(as_of) - pd.to_timedelta(wait, unit="D")).dt.strftime("%Y-%m-%d")
    due_since = _due_since(anchor, wait, inv.profile["unit"], calendar)
    decided = _dunning_rows(inv, good, step, escalation, previous_by, days_in_step, due_since)
    return Decision(due=decided.reset_index(drop=True).loc[:, list(DUNNING_COLUMNS)],
                    quarantined=_quarantine_frame(rows, reason, _text(inv.client, "name"),
                                                  ("invoice row ", "no. " + _text(rows, "number"), ", ")),
                    skipped=skipped)


def dunning_steps_for(invoices: pd.DataFrame, clients: pd.DataFrame, keys: pd.DataFrame, as_of: date,
                      timezone: str = "UTC", escalation_to: str | None = None,
                      profiles: Profiles | None = None) -> Decision:
    """The facts of dunning steps already in the ledger (`keys`: key, subject_id, step)
    from their invoices and clients as they are now: to render a reserved step that was
    never stored. A key whose invoice is gone or bad is quarantined, keyed by its key."""
    profiles = profiles or default_profile((7, 5, 7), "sent")
    inv = _invoices(invoices, clients, timezone, profiles, None,
                    relevant=lambda p, *_: pd.Series(True, index=p.index))
    rows = inv.rows
    by_id = dict(zip(_text(rows, "id"), rows.index, strict=False))
    wanted = keys.reset_index(drop=True)
    position = wanted["subject_id"].astype("string").map(by_id)
    found = position.notna()
    picked = position[found].astype(np.int64)
    reason = pd.Series("the invoice is no longer in invoices", index=wanted.index, dtype="string")
    reason[found] = inv.reason.reindex(picked).to_numpy()
    escalation, usable = _escalations(inv.profile, escalation_to)
    overdue = wanted["step"].astype("string") == DunningStep.OVERDUE
    usable_wanted = pd.Series(False, index=wanted.index)
    usable_wanted[found] = usable.reindex(picked).to_numpy()
    reason = reason.mask(reason.isna() & overdue & ~usable_wanted, ESCALATION_NEEDED)
    good = reason.isna()
    chosen = picked[good[found]]
    def pick(part: pd.Series) -> pd.Series:
        return part.loc[chosen].reset_index(drop=True)

    picked_inv = _Invoices(rows.loc[chosen].reset_index(drop=True),
                           inv.client.loc[chosen].reset_index(drop=True),
                           participating=pick(inv.participating), sent_date=pick(inv.sent_date),
                           due_date=pick(inv.due_date), start_date=pick(inv.start_date),
                           reason=pick(inv.reason), profile=inv.profile.loc[chosen].reset_index(drop=True),
                           hold_end=pick(inv.hold_end))
    everything = pd.Series(True, index=picked_inv.rows.index)
    step = wanted.loc[good, "step"].astype("string").reset_index(drop=True)
    none = pd.Series(pd.NA, index=everything.index, dtype="string")
    decided = _dunning_rows(picked_inv, everything, step, escalation.loc[chosen].reset_index(drop=True),
                            none, pd.Series(0, index=everything.index),
                            pd.Series(pd.NaT, index=everything.index, dtype="datetime64[ns]"))
    return Decision(due=decided.loc[:, list(DUNNING_COLUMNS)].reset_index(drop=True),
                    quarantined=pd.DataFrame({"source_id": wanted.loc[~good, "key"],
                                              "reason": reason[~good]}).reset_index(drop=True))


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
