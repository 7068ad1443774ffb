"""Oracles: the rules restated plainly, to hold a faster or less obvious form to them.

`expected_dunning_emails` is the dunning calendar night by night (holds, business days,
profiles, minimums included), which the pure rule (tests/unit/test_dunning_rule.py) and the
nights on both databases (tests/integration/test_dunning_calendar.py) are held to.
`renewal_settled` is the specification of sql/fragments/renewal_settled, the quiet night's
shortcut (tests/integration/test_settled.py holds the SQL to it on generated contracts);
the row-by-row reference of every rule is tests/helpers/hostile.py.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import date, timedelta

import numpy as np

from dueflow.tasks.core.decide import column_text, id_copies
from dueflow.tasks.core.frames import pd
from dueflow.tasks.core.keys import renewal_keys
from dueflow.tasks.core.renewal_rule import due_lead
from dueflow.tasks.core.statuses import CONTRACT_ACTIVE
from dueflow.tasks.core.validate import as_dates


def renewal_settled(contracts: pd.DataFrame, history: pd.DataFrame, open_keys: dict[str, str],
                    as_of: date, leads: Sequence[int]) -> pd.Series:
    """The contract rows the ledger already settles tonight: active, id unique, tonight's
    due lead or a more urgent one of the cycle reserved (`history`: subject_id, cycle,
    handled_rank, as sql/renewal_history gives it), and tonight's key neither pending nor
    failed (`open_keys`: key → status). The specification of sql/fragments/renewal_settled,
    which lets a night skip reading and deciding them; deciding such a row would only say
    "already handled"."""
    rows = contracts.reset_index(drop=True)
    renewal = as_dates(rows["renewal_date"])
    days_left = (renewal - pd.Timestamp(as_of)).dt.days
    lead = pd.Series(due_lead(days_left.fillna(-1).to_numpy(dtype=np.int64), leads),
                     index=rows.index).where(renewal.notna(), -1)
    ids = column_text(rows, "id")
    cycle = renewal.dt.strftime("%Y-%m-%d").astype("string")
    ranks = history.astype({"subject_id": "string", "cycle": "string"}).groupby(
        ["subject_id", "cycle"])["handled_rank"].min()
    pairs = pd.MultiIndex.from_arrays([ids.fillna("\x00"), cycle.fillna("\x00")])
    handled_rank = pd.to_numeric(pd.Series(ranks.reindex(pairs).to_numpy(), index=rows.index))
    key = renewal_keys(ids, cycle, lead)
    open_key = key.isin(list(open_keys)).fillna(False).astype(bool)
    return ((lead >= 0) & (column_text(rows, "status") == CONTRACT_ACTIVE).fillna(False)
            & (id_copies(ids) == 1) & ids.notna()
            & (handled_rank <= lead).fillna(False) & ~open_key).astype(bool)


@dataclass(frozen=True)
class InvoiceFacts:
    """What the data and settings say of one invoice on one night (the oracle's input):
    its profile's delays, last step and unit, its hold's end (invoice hold or client pause,
    the later), whether it is paid, and whether its amount is below the minimum."""

    delays: Sequence[int] = (7, 5, 7)
    last_rank: int = 3
    unit: str = "calendar"
    hold_end: date | None = None
    paid: bool = False
    below_minimum: bool = False


def expected_dunning_emails(starts: dict[str, date], nights: Sequence[date],
                            facts: Callable[[date, str], InvoiceFacts],
                            open_day: Callable[[date], bool] = lambda _: True,
                            ) -> tuple[list[tuple[date, str, int]], list[tuple[date, str]]]:
    """The dunning calendar, one night and one invoice at a time, straight from
    docs/design.md: the emails (night, invoice, step rank) the runs of `nights` send, in
    order, and the (night, invoice) skipped below the minimum. On a closed day nothing goes
    out; an invoice takes at most one step a night, the first night its wait is over; the
    wait counts from its last step (or its start) or from the end of a hold that ends later,
    in calendar days or in the open days after it; a held, paid or finished invoice waits."""
    last = {invoice: (0, start) for invoice, start in starts.items()}
    sent: list[tuple[date, str, int]] = []
    skipped: list[tuple[date, str]] = []
    for night in nights:
        if not open_day(night):
            continue
        for invoice in starts:
            f = facts(night, invoice)
            rank, since = last[invoice]
            if f.paid or rank >= f.last_rank or (f.hold_end is not None and f.hold_end > night):
                continue
            anchor = max(since, f.hold_end) if f.hold_end is not None else since
            if f.unit == "business":
                elapsed = sum(open_day(anchor + timedelta(days=n))
                              for n in range(1, (night - anchor).days + 1))
            else:
                elapsed = (night - anchor).days
            if elapsed < f.delays[rank]:
                continue
            if f.below_minimum:
                skipped.append((night, invoice))
                continue
            sent.append((night, invoice, rank + 1))
            last[invoice] = (rank + 1, night)
    return sent, skipped


def expected_renewal_keys(renewals_on: Callable[[date], dict[str, tuple[date, bool]]],
                          run_dates: Sequence[date], leads: Sequence[int],
                          open_day: Callable[[date], bool] = lambda _: True) -> list[str]:
    """The renewal calendar, one night and one contract at a time (docs/design.md): per run
    date, the most urgent lead crossed, once per cycle, never after a more urgent one. With a
    calendar (`open_day`), nothing on a closed day, and on a business day a renewal that fell
    on the closed days just past counts as renewing that day."""
    most_urgent: dict[tuple[str, date], int] = {}
    keys = []
    for run_date in run_dates:
        if not open_day(run_date):
            continue
        first = run_date  # the day after the last business day before it
        while not open_day(first - timedelta(days=1)) and (run_date - first).days < 366:
            first -= timedelta(days=1)
        for cid, (renewal, active) in renewals_on(run_date).items():
            days_left = (renewal - run_date).days
            if days_left < 0 and renewal >= first:
                days_left = 0
            if not active or days_left < 0 or days_left > max(leads):
                continue
            lead = min(x for x in leads if x >= days_left)
            if most_urgent.get((cid, renewal), 10**9) <= lead:
                continue
            most_urgent[(cid, renewal)] = lead
            keys.append(f"renewal/{cid}/{renewal.isoformat()}/{lead}d")
    return keys


def expected_statements(emitted: Sequence[tuple[date, str, int]], client_of: Callable[[str], str],
                        grouping: str) -> list[tuple[date, frozenset[str]]]:
    """One statement per client (docs/design.md, "Statements"), straight from its words: on
    each night, a client's reminders (steps 1 and 2) go as one email when there are two or
    more, and with `all` its escalations (step 3) too; the rest go alone. The emails
    (night, the invoices in it), sorted."""
    groups: dict[tuple[date, str, str], set[str]] = {}
    for night, invoice, rank in emitted:
        kind = "escalation" if rank == 3 else "reminder"
        together = grouping == "all" or (grouping == "reminders" and kind == "reminder")
        where = (night, client_of(invoice), kind) if together else (night, invoice, f"alone-{rank}")
        groups.setdefault(where, set()).add(invoice)
    emails = [(night, frozenset(members)) for (night, _, _), members in groups.items()]
    return sorted(emails, key=lambda email: (email[0], sorted(email[1])))
