"""The dunning rule (docs/design.md, "The rules"): which step of which invoice is due on a
night, and which invoices are quarantined and why (invoices.INVOICE_REASONS). Pure and
vectorised: DataFrames and dates in, a Decision out.

The night's order: read the invoices with their clients and profiles (invoices.py, what
does not depend on the ledger); place each invoice in its steps (dunning_steps.py, what
the ledger says); then, once per invoice, the day its wait counts from and the days
elapsed since; the reasons are checked for the invoices that may be due tonight; what is
due, good and above its currency's minimum is tonight's step.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date
from decimal import Decimal

import numpy as np

from dueflow.tasks.core import defaults
from dueflow.tasks.core.addresses import valid_email
from dueflow.tasks.core.calendar import BusinessCalendar
from dueflow.tasks.core.charges import CHARGE_COLUMNS, Rates, charges
from dueflow.tasks.core.decide import TEXT_LIMIT, Decision, closed_tonight, column_text, quarantine_frame
from dueflow.tasks.core.dunning_steps import (
    DunningSteps,
    anchor_of,
    due_since_of,
    elapsed_days,
    may_be_due,
    steps_of,
)
from dueflow.tasks.core.frames import pd
from dueflow.tasks.core.invoices import (
    Invoices,
    check_invoices,
    ended,
    optional_dates,
    read_invoices,
    start_dates,
)
from dueflow.tasks.core.keys import CLIENT_STEPS, DUNNING_STEPS, DunningStep, dunning_keys, printable_ids
from dueflow.tasks.core.locales import SUPPORTED_LOCALES
from dueflow.tasks.core.money import below_minimum
from dueflow.tasks.core.parameters import DunningStart  # checked there, once (dunning_start_of)
from dueflow.tasks.core.profiles import Profiles, default_profile
from dueflow.tasks.core.text import lowered, one_line, stripped

DUNNING_COLUMNS = (
    "key", "subject_id", "cycle", "step", "step_rank", "recipient", "previous_by", "handled",
    "number", "amount", "currency", "issue_date", "due_date", "client_id", "client_name",
    "client_email", "locale", "notes", "days_in_step", "cc_recipient", "pdf_path", "due_since",
    # `amount` is what the client still owes (open_amount.owed); these say what it was read from.
    "invoice_amount", "received", "received_on", "credited", "payment_state",
    # What a profile's step states besides, never added to it (charges.py); the profile's name.
    "profile", *CHARGE_COLUMNS,
    "statements",
)
ESCALATION_NEEDED = "OVERDUE escalation needs DUEFLOW_ESCALATION_TO set to a valid address"
PAID_BY_PAYMENTS = "nothing left to pay: paid in full by its payments and credit notes"


@dataclass(frozen=True)
class DunningRules:
    """What shapes dunning beyond the run's parameters (all optional; the defaults change
    nothing): the named profiles clients choose, the business-day calendar, the minimum
    open amount per currency."""

    profiles: Profiles | None = None  # None: the run's parameters for every client
    calendar: BusinessCalendar | None = None
    minimums: Mapping[str, Decimal] = field(default_factory=dict)
    rates: Rates = field(default_factory=Rates)  # statutory interest (charges.py)


def dunning_may_be_due(invoices: pd.DataFrame, history: pd.DataFrame, as_of: date,
                       delays: Sequence[int] = defaults.DUNNING_DELAYS, timezone: str = "UTC",
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
    sent_date, due_date = start_dates(rows, timezone)
    steps = steps_of(rows, history, delays)
    start_date = sent_date if start == "sent" else due_date
    held = (optional_dates(rows, "dunning_hold_until", timezone)[0] > pd.Timestamp(as_of)
            ).fillna(False).astype(bool)
    days = (pd.Timestamp(as_of) - steps.step_date.where(steps.rank > 0, start_date)).dt.days
    return (~ended(rows) & ~held & may_be_due(steps, days)).astype(bool)


def _escalations(profile: pd.DataFrame, escalation_to: str | None) -> tuple[pd.Series, pd.Series]:
    """Each row's escalation address (its profile's, else DUEFLOW_ESCALATION_TO) and whether
    it is usable."""
    address = profile["escalation_to"].astype("string").fillna(escalation_to if escalation_to else pd.NA)
    usable = valid_email(address.fillna("")) & address.notna()
    return address, usable.astype(bool)


def _next_rank(steps: DunningSteps) -> np.ndarray:
    """The rank of each invoice's next step: the one after its last, or the escalation
    after a client step that bounced (the client cannot be reached)."""
    return np.where(steps.bounced, len(DUNNING_STEPS), steps.rank + 1)


def _skipped(rows: pd.DataFrame, open_amount: pd.Series, below: pd.Series,
             minimums: Mapping[str, Decimal]) -> pd.DataFrame:
    currency = rows.loc[below, "currency"].astype("string")
    return pd.DataFrame({
        "source_id": printable_ids(rows.loc[below, "id"]),
        "reason": ("open amount " + open_amount[below] + " " + currency
                   + " is below the minimum "
                   + currency.map({c: str(m) for c, m in minimums.items()}).astype("string")
                   + " (DUEFLOW_DUNNING_MINIMUM)"),
    }).reset_index(drop=True).astype("string")


def _quarantined(inv: Invoices, reason: pd.Series) -> pd.DataFrame:
    return quarantine_frame(inv.rows, reason, column_text(inv.client, "name"),
                            ("invoice row ", "no. " + column_text(inv.rows, "number"), ", "))


def due_dunning_steps(
    invoices: pd.DataFrame,
    clients: pd.DataFrame,
    history: pd.DataFrame,
    as_of: date,
    delays: Sequence[int] = defaults.DUNNING_DELAYS,
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
    calendar = rules.calendar
    inv = read_invoices(invoices, clients, timezone, rules.profiles or default_profile(tuple(delays), start),
                        as_of)
    rows, unit = inv.rows, inv.profile["unit"]
    steps = steps_of(rows, history, inv.profile)
    anchor = anchor_of(steps, inv.start_date, inv.hold_end)
    elapsed = elapsed_days(anchor, unit, as_of, calendar)
    # Reasons are checked only for the rows whose next step may be due tonight (or whose
    # start is unreadable): the rows sql/dunning_candidates reads, whatever else is given.
    reason = check_invoices(inv, among=inv.participating & may_be_due(steps, elapsed))

    next_rank = _next_rank(steps)
    # A client step that bounced: the client cannot be reached, so no later reminder goes
    # out; when the next step would be due, the escalation is, in its place. A profile's
    # last step ends its invoice's dunning there.
    due = (inv.participating & (steps.rank < len(DUNNING_STEPS)) & (steps.done | steps.bounced)
           & (next_rank <= inv.profile["last_rank"].to_numpy())
           & (elapsed >= steps.wait).fillna(False).astype(bool))
    if closed_tonight(as_of, calendar):
        due &= False  # a closed day: what falls due goes out on the next business day
    overdue = due & (next_rank == len(DUNNING_STEPS))
    escalation, usable = _escalations(inv.profile, escalation_to)
    reason = reason.mask(reason.isna() & overdue & ~usable, ESCALATION_NEEDED)

    good = due & reason.isna()
    below = below_minimum(inv.owed["open"], rows["currency"], dict(rules.minimums)) & good
    good &= ~below
    step = pd.Series(np.asarray([s.value for s in DUNNING_STEPS], dtype=object)[
        np.minimum(next_rank, len(DUNNING_STEPS)) - 1], index=rows.index, dtype="string")
    previous_by = (pd.Timestamp(as_of) - pd.to_timedelta(steps.wait, unit="D")).dt.strftime("%Y-%m-%d")
    decided = _dunning_rows(inv, good, step, escalation, previous_by,
                            days_in_step=(pd.Timestamp(as_of) - anchor).dt.days,
                            due_since=due_since_of(anchor, steps.wait, unit, calendar))
    decided = with_charges(decided, rules.profiles, rules, as_of)
    return Decision(due=decided.reset_index(drop=True).loc[:, list(DUNNING_COLUMNS)],
                    quarantined=_quarantined(inv, reason),
                    skipped=_skipped(rows, inv.owed["open"], below, rules.minimums))


def dunning_steps_for(invoices: pd.DataFrame, clients: pd.DataFrame, keys: pd.DataFrame, as_of: date,
                      timezone: str = "UTC", escalation_to: str | None = None,
                      profiles: Profiles | None = None, rules: DunningRules | None = None) -> Decision:
    """The facts of dunning steps already in the ledger (`keys`: key, subject_id, step)
    from their invoices and clients as they are now: to render a reserved step that was
    never stored. A key whose invoice is gone or bad is quarantined, keyed by its key."""
    inv = read_invoices(invoices, clients, timezone,
                        profiles or default_profile(defaults.DUNNING_DELAYS, "sent"), None)
    checked = check_invoices(inv)
    by_id = pd.Series(inv.rows.index, index=column_text(inv.rows, "id"))
    by_id = by_id[~by_id.index.duplicated(keep="last") & by_id.index.notna()]
    wanted = keys.reset_index(drop=True)
    position = wanted["subject_id"].astype("string").map(by_id)
    found = position.notna()
    picked = position[found].astype(np.int64)
    reason = pd.Series("the invoice is no longer in invoices", index=wanted.index, dtype="string")
    reason[found] = checked.reindex(picked).to_numpy()
    escalation, usable = _escalations(inv.profile, escalation_to)
    overdue = wanted["step"].astype("string") == DunningStep.OVERDUE
    usable_wanted = pd.Series(False, index=wanted.index)
    usable_wanted[found] = usable.reindex(picked).to_numpy()
    reason = reason.mask(reason.isna() & overdue & ~usable_wanted, ESCALATION_NEEDED)
    settled = pd.Series(False, index=wanted.index)
    settled[found] = inv.owed["settled"].reindex(picked).to_numpy()
    reason = reason.mask(reason.isna() & settled, PAID_BY_PAYMENTS)
    good = reason.isna()
    chosen = picked[good[found]]
    everything = pd.Series(True, index=pd.RangeIndex(len(chosen)))
    decided = _dunning_rows(inv.taken(chosen), everything,
                            wanted.loc[good, "step"].astype("string").reset_index(drop=True),
                            escalation.loc[chosen].reset_index(drop=True),
                            previous_by=pd.Series(pd.NA, index=everything.index, dtype="string"),
                            days_in_step=pd.Series(0, index=everything.index),
                            due_since=pd.Series(pd.NaT, index=everything.index, dtype="datetime64[ns]"))
    decided = with_charges(decided, profiles, rules, as_of)
    return Decision(due=decided.loc[:, list(DUNNING_COLUMNS)].reset_index(drop=True),
                    quarantined=pd.DataFrame({"source_id": wanted.loc[~good, "key"],
                                              "reason": reason[~good]}).reset_index(drop=True))


def _dunning_rows(inv: Invoices, good: pd.Series, step: pd.Series, escalation_to: pd.Series,
                  previous_by: pd.Series, days_in_step: pd.Series, due_since: pd.Series) -> pd.DataFrame:
    """The facts of the good invoices' steps, one row each, keys included."""
    rows, client = inv.rows, inv.client
    invoice_id = rows.loc[good, "id"].astype("string")
    step = step[good].astype("string")
    locale = lowered(client.loc[good, "locale"])
    emails = stripped(client.loc[good, "email"])
    cc = stripped(column_text(client, "cc_email")[good]).replace("", pd.NA)
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
            "amount": inv.owed.loc[good, "open"],
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
            "pdf_path": column_text(rows, "pdf_path")[good],
            "due_since": due_since[good].dt.date,
            "invoice_amount": stripped(rows.loc[good, "amount"]),
            "received": inv.owed.loc[good, "received"],
            "received_on": inv.owed.loc[good, "received_on"],
            "credited": inv.owed.loc[good, "credited"],
            "payment_state": inv.owed.loc[good, "state"],
            "profile": inv.profile.loc[good, "name"].fillna(""),
            # The client's profile's choice of statements (NA: DUEFLOW_STATEMENTS).
            "statements": inv.profile.loc[good, "statements"].astype("string"),
        }
    )


def with_charges(due: pd.DataFrame, profiles: Profiles | None, rules: DunningRules | None,
                 as_of: date) -> pd.DataFrame:
    """The due rows with what their profile's step states besides the open amount: fee,
    interest, compensation, pay-by date (charges.py; NA where none)."""
    said = profiles.step_charges() if profiles else {}
    rules = rules or DunningRules()
    found = charges(due, said, rules.rates, as_of, rules.calendar)
    return due.assign(**{column: found[column] for column in CHARGE_COLUMNS})

