"""Invoices with their clients, as the dunning rule reads them: the part of dunning that
does not depend on the ledger — each invoice's client and profile, its dates, its holds,
whether it takes part tonight — and the reasons an invoice is quarantined
(INVOICE_REASONS, in priority order). Pure and vectorised."""

from __future__ import annotations

from dataclasses import dataclass, fields
from datetime import date

import numpy as np

from dueflow.tasks.core.addresses import address_problems
from dueflow.tasks.core.decide import column_text, id_copies
from dueflow.tasks.core.frames import pd
from dueflow.tasks.core.keys import id_problems
from dueflow.tasks.core.money import amount_problems, known_currency
from dueflow.tasks.core.open_amount import owed
from dueflow.tasks.core.profiles import Profiles
from dueflow.tasks.core.reasons import (
    Reason,
    both,
    first_failing,
    holds_a_problem,
    is_false,
    is_not,
    is_true,
    missing,
    repeated,
    utf8_reasons,
)
from dueflow.tasks.core.statuses import INVOICE_DUNNED, INVOICE_ENDED
from dueflow.tasks.core.text import VALID_UTF8, stripped
from dueflow.tasks.core.validate import business_dates, flag_values

# Why an invoice cannot be dunned, most important first: a row is quarantined with the first
# it fails. The facts are those of read_invoices and reason_facts ("clients.<column>": the
# invoice's client's).
INVOICE_REASONS = (
    Reason("id unusable", ("id",), holds_a_problem("id_problem"), "{id_problem}"),
    Reason("id repeated", ("id",), repeated("id_copies"), "id {id!r} appears {id_copies} times in invoices"),
    *utf8_reasons("invoices", ("client_id", "number", "amount", "currency", "status", "sent_at", "due_date",
                               "dunning_hold_until")),
    Reason("status missing", ("status",), missing("status"), "status missing"),
    Reason("status unknown", ("status",), is_not("status", INVOICE_DUNNED), "unknown status {status!r}"),
    Reason("client_id missing", ("client_id",), missing("client_id"), "client_id missing"),
    Reason("client not found", ("client_id", "clients.id"), is_false("client_found"),
           "client {client_id!r} not found"),
    Reason("client repeated", ("client_id", "clients.id"), repeated("client_copies"),
           "client {client_id!r} appears {client_copies} times in clients"),
    *utf8_reasons("clients", ("name", "email", "locale", "notes", "dunning_paused", "cc_email",
                              "dunning_paused_until", "dunning_profile"), prefix="clients."),
    Reason("dunning_paused unreadable", ("clients.dunning_paused",), missing("paused"),
           "client dunning_paused is neither true nor false: {clients.dunning_paused!r}"),
    Reason("hold unreadable", ("dunning_hold_until",), is_true("hold_unreadable"),
           "dunning_hold_until is not a date: {dunning_hold_until!r}"),
    Reason("pause unreadable", ("clients.dunning_paused_until",), is_true("pause_unreadable"),
           "client dunning_paused_until is not a date: {clients.dunning_paused_until!r}"),
    Reason("profile unknown", ("clients.dunning_profile",), is_true("profile_unknown"),
           "client dunning_profile {profile_asked!r} is not a known profile (DUEFLOW_PROFILES_FILE)"),
    Reason("client email invalid", ("clients.email",), holds_a_problem("email_problem"),
           "client email is not a valid address: {clients.email!r}: it {email_problem}"),
    Reason("cc_email invalid", ("clients.cc_email",), holds_a_problem("cc_problem"),
           "client cc_email is not a valid address: {clients.cc_email!r}: it {cc_problem}"),
    Reason("sent_at unreadable", ("sent_at", "clients.dunning_profile"),
           both(missing("start_date"), is_true("by_sent")), "sent_at missing or not a valid timestamp"),
    Reason("due_date unreadable", ("due_date", "clients.dunning_profile"), missing("start_date"),
           "due_date missing or not a valid date"),
    # Counted from sent_at, an invoice may have no due date (its emails say none); one that
    # holds something else is not read as "none" (G6).
    Reason("due_date not a date", ("due_date",), both(missing("due_day"), is_true("due_date_given")),
           "due_date is not a date: {due_date!r}"),
    Reason("currency unknown", ("currency",), is_false("currency_known"), "unknown currency {currency!r}"),
    Reason("amount unusable", ("amount", "currency"), holds_a_problem("amount_problem"), "{amount_problem}"),
    # What the client still owes cannot be told without a guess (open_amount.owed).
    Reason("open amount unknown", ("amount", "currency"),
           holds_a_problem("open_problem"), "{open_problem}"),
)


@dataclass(frozen=True)
class Invoices:
    """Invoices with their clients, read (every field aligned with `rows`)."""

    rows: pd.DataFrame
    client: pd.DataFrame  # each invoice's client row (the first of its id; NA: not found)
    participating: pd.Series  # not ended, client not paused, not held tonight
    sent_date: pd.Series
    due_date: pd.Series
    start_date: pd.Series  # what SENT is dated by: sent_date or due_date, per profile
    profile: pd.DataFrame  # per row: d1, d2, d3, start, last_rank, unit, escalation_to
    hold_end: pd.Series  # the day the invoice's hold or its client's pause ends (NaT: none)
    owed: pd.DataFrame  # open_amount.Owed as columns: open, received, credited, received_on, settled, state
    facts: pd.DataFrame  # what INVOICE_REASONS read, but the amount (reason_facts)

    def taken(self, positions: pd.Series) -> Invoices:
        """The invoices at `positions`, in that order (one may come twice), numbered anew."""
        return Invoices(**{f.name: getattr(self, f.name).loc[positions].reset_index(drop=True)
                           for f in fields(self)})


def ended(rows: pd.DataFrame) -> pd.Series:
    """Invoices that take no part in dunning: paid, or in a status that ends it."""
    paid = rows["paid_at"].notna() if "paid_at" in rows else pd.Series(False, index=rows.index)
    return column_text(rows, "status").isin(INVOICE_ENDED).fillna(False).astype(bool) | paid


def start_dates(rows: pd.DataFrame, timezone: str) -> tuple[pd.Series, pd.Series]:
    """Each invoice's sent date (business zone) and due date."""
    return business_dates(rows["sent_at"], timezone), business_dates(rows["due_date"], timezone)


def optional_dates(frame: pd.DataFrame, column: str, timezone: str) -> tuple[pd.Series, pd.Series]:
    """An optional date column: its dates (NaT where empty) and where it holds something
    that is not a date (quarantined: a hold we cannot read is not ignored)."""
    text = stripped(column_text(frame, column)).replace("", pd.NA)
    dates = business_dates(text, timezone)
    return dates, (text.notna() & dates.isna()).astype(bool)


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


def _hold_ends(rows: pd.DataFrame, client: pd.DataFrame, client_copies: pd.Series, timezone: str
               ) -> tuple[pd.Series, pd.Series, pd.Series, pd.Series]:
    """Holds with an end, per invoice: the invoice's own (Mahnstopp, dunning_hold_until) and
    its client's pause (dunning_paused_until; only a client row that is the only one with its
    id counts), NaT where none; and where each holds something that is not a date (the
    invoice is quarantined: a hold we cannot read is not ignored). Held while the later end
    is after tonight."""
    hold, bad_hold = optional_dates(rows, "dunning_hold_until", timezone)
    pause_end, bad_pause = optional_dates(client, "dunning_paused_until", timezone)
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
    asked = stripped(column_text(client, "dunning_profile")).fillna("")
    table = profiles.frame()
    known = asked.isin(table.index)
    chosen = table.reindex(asked.where(known, "")).reset_index(drop=True)
    chosen.index = client.index
    return chosen, asked, ~known


def read_invoices(invoices: pd.DataFrame, clients: pd.DataFrame, timezone: str, profiles: Profiles,
                  as_of: date | None) -> Invoices:
    """The invoices with their clients and profiles, read for `as_of` (None: nothing is
    held — a ledger row decided again)."""
    rows = invoices.reset_index(drop=True)
    sent_date, due_date = start_dates(rows, timezone)
    client, client_found, client_copies = _client_of(rows, clients)
    profile, asked, unknown_profile = _profiles_of(client, profiles)
    by_sent = (profile["start"] == "sent").to_numpy()
    start_date = sent_date.where(by_sent, due_date)
    paused = flag_values(client["dunning_paused"])
    hold, pause_end, bad_hold, bad_pause = _hold_ends(rows, client, client_copies, timezone)
    hold_end = pd.concat([hold, pause_end], axis=1).max(axis=1)
    held = ((hold_end > pd.Timestamp(as_of)) if as_of is not None
            else pd.Series(False, index=rows.index)).fillna(False).astype(bool)
    # A client row counts only if it is the only one with its id: an invoice whose client
    # is duplicated takes part, and is quarantined, whichever copy says "paused". Nothing
    # left to pay ends dunning as `paid` does.
    left = owed(rows)
    participating = (~ended(rows) & ~(paused.fillna(False).astype(bool) & (client_copies == 1)) & ~held
                     & ~left.settled)
    ids = column_text(rows, "id")
    client_email = client["email"].astype("string")
    # The account manager's copy (optional): absent or blank is none; anything else must
    # be one address, or the row is quarantined — a bad one never reaches a header (G6).
    cc_email = column_text(client, "cc_email")
    cc_given = (cc_email.str.strip() != "").fillna(False).astype(bool)
    source = {str(c): v for c, v in rows.items()} | {f"clients.{c}": v for c, v in client.items()}
    facts = pd.DataFrame(source | {
        "id": ids, "status": column_text(rows, "status"), "client_id": column_text(rows, "client_id"),
        "clients.email": client_email, "clients.cc_email": cc_email,  # as text
        "id_problem": id_problems(ids), "id_copies": id_copies(ids), "client_found": client_found,
        "client_copies": client_copies, "paused": paused, "hold_unreadable": bad_hold,
        "pause_unreadable": bad_pause, "profile_asked": asked, "profile_unknown": unknown_profile,
        "email_problem": address_problems(client_email),
        "cc_problem": address_problems(cc_email.str.strip()).where(cc_given), "start_date": start_date,
        "by_sent": by_sent, "due_day": due_date, "due_date_given": _given(rows, "due_date"),
        "currency_known": known_currency(rows["currency"]), "open_problem": left.problem,
    })
    facts.attrs[VALID_UTF8] = bool(rows.attrs.get(VALID_UTF8) and clients.attrs.get(VALID_UTF8))
    owed_frame = pd.DataFrame({"open": left.open, "received": left.received, "credited": left.credited,
                               "received_on": left.received_on, "settled": left.settled, "state": left.state})
    return Invoices(rows, client, participating, sent_date, due_date, start_date, profile, hold_end,
                    owed_frame, facts)


def _given(frame: pd.DataFrame, column: str) -> pd.Series:
    """Where a column holds something (not NULL, not blank)."""
    return stripped(column_text(frame, column)).replace("", pd.NA).notna().astype(bool)


def reason_facts(inv: Invoices, among: pd.Series) -> pd.DataFrame:
    """The facts INVOICE_REASONS read: those read with the invoices, and the amount's
    problem, read only for the invoices `among` those that matter tonight."""
    rows = inv.rows
    amount_problem = pd.Series(pd.NA, index=rows.index, dtype="string")
    amount_problem[among] = amount_problems(rows.loc[among, "amount"], rows.loc[among, "currency"],
                                            positive=True)
    return inv.facts.assign(amount_problem=amount_problem)


def check_invoices(inv: Invoices, among: pd.Series | None = None) -> pd.Series:
    """Why each invoice `among` those given (every one by default) cannot be dunned: the
    first of INVOICE_REASONS it fails, NA where none (or not among)."""
    wanted = pd.Series(True, index=inv.rows.index) if among is None else among
    return first_failing(INVOICE_REASONS, reason_facts(inv, wanted), among=wanted)
