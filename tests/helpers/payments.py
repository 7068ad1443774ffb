"""Payments and credit notes arriving between nights (issue 43), one scenario for every
store: the in-memory twin (tests/unit/test_open_amount.py) and SQLite and PostgreSQL with the
payments in the company's own relation (tests/integration/test_open_amount.py)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import date, timedelta
from typing import Any

import pytest

from dueflow.tasks import steps
from dueflow.tasks.adapters.memory import MemorySources
from dueflow.tasks.core.ports import Store
from dueflow.tasks.night import Direct, run_night
from tests.helpers.factories import client, insert, invoice
from tests.helpers.fakes import FakeTransport
from tests.helpers.nights import night_of, run

AS_OF = date(2027, 3, 10)
SENT = (AS_OF - timedelta(days=8)).isoformat()  # the first reminder is due on AS_OF (7 days)
DELAYS = [7, 7, 7]
# The company's own payments relation (no key), for the SQL stores.
PAYMENTS_TABLE = {"sqlite": "invoice_id text, amount text, currency text, received_at text",
                  "postgresql": "invoice_id text, amount numeric, currency text, received_at date"}

CLIENTS = [client("cl1")]
INVOICES = [invoice(f"i{n}", "cl1", SENT, amount="1000.00") for n in range(1, 9)]
# (invoice, amount, currency, received): before the first night.
BEFORE = [("i1", "400.00", "EUR", AS_OF - timedelta(days=5)),          # paid in part
          ("i2", "1200.00", "EUR", AS_OF - timedelta(days=2)),         # overpaid
          ("i3", "-1500.00", "EUR", AS_OF - timedelta(days=2)),        # a credit note above the invoice
          ("i4", "400.00", "USD", AS_OF - timedelta(days=2)),          # another currency
          ("i5", "-250.00", "EUR", AS_OF - timedelta(days=3)),         # a credit note ...
          ("i5", "100.00", "EUR", AS_OF - timedelta(days=1)),          # ... and an instalment
          ("i6", "300.00", "EUR", AS_OF + timedelta(days=1)),          # after the night: not yet
          ("i8", "500.00", "EUR", AS_OF - timedelta(days=4)),          # two instalments: paid
          ("i8", "500.00", "EUR", AS_OF - timedelta(days=1))]
# Between the first and the second night: i1 paid in full, i5 once more.
BETWEEN = [("i1", "600.00", "EUR", AS_OF + timedelta(days=3)),
           ("i5", "150.00", "EUR", AS_OF + timedelta(days=4))]

Pay = Callable[[str, str, str, date], None]
Body = Callable[[str], str]
Reasons = Callable[[], dict[str, str]]


def memory_pay(store: Store) -> Pay:
    sources = store.sources
    assert isinstance(sources, MemorySources)
    return lambda invoice_id, amount, currency, received: sources.pay(invoice_id, amount, currency,
                                                                      received.isoformat())


def sql_pay(url: str) -> Pay:
    return lambda invoice_id, amount, currency, received: insert(url, "payments", [{
        "invoice_id": invoice_id, "amount": amount, "currency": currency,
        "received_at": received.isoformat()}])


def nights_with_payments(store: Store, pay: Pay, body: Body, reasons: Reasons) -> dict[str, Any]:
    """Two nights a week apart with payments arriving before and between them; what each
    sent, and the reasons of what was quarantined."""
    for payment in BEFORE:
        pay(*payment)
    first = FakeTransport()
    run(store, AS_OF, first, dunning_delays=DELAYS, bounds=None)
    sent_first = sorted(first.handed)
    bodies = {key: body(key) for key in sent_first}
    for payment in BETWEEN:
        pay(*payment)
    second = FakeTransport()
    run(store, AS_OF + timedelta(days=7), second, dunning_delays=DELAYS, bounds=None)
    return {"first": sent_first, "bodies": bodies, "second": sorted(second.handed), "reasons": reasons()}


def check_nights(seen: dict[str, Any]) -> None:
    """What a credit controller expects of nights_with_payments, on every store."""
    assert seen["first"] == ["dunning/i1/REMINDED_1", "dunning/i5/REMINDED_1", "dunning/i6/REMINDED_1",
                             "dunning/i7/REMINDED_1"]
    first = seen["bodies"]["dunning/i1/REMINDED_1"]
    assert "Open amount: €600.00 (of €1,000.00, €400.00 received on 5 March 2027)" in first
    assert "for €600.00" in first and "1,000.00 was" not in first
    assert "Open amount: €650.00 (of €1,000.00, €100.00 received on 9 March 2027, €250.00 credited)" in \
        seen["bodies"]["dunning/i5/REMINDED_1"]
    assert "Amount:      €1,000.00" in seen["bodies"]["dunning/i6/REMINDED_1"]  # paid after the night
    # i1 paid in full between the nights: no second reminder; i5 still owes 500.00.
    assert seen["second"] == ["dunning/i5/REMINDED_2", "dunning/i6/REMINDED_2", "dunning/i7/REMINDED_2"]
    reasons = seen["reasons"]
    assert reasons["i2"].startswith("overpaid: 1200.00 paid and credited on an invoice of 1000.00")
    assert reasons["i3"] == "credit notes of 1500.00 exceed the invoice's amount 1000.00"
    assert reasons["i4"].startswith("a payment in USD on an invoice in EUR")
    assert set(reasons) == {"i2", "i3", "i4"}  # i8, paid by instalments, is simply not dunned


# ------------------------------------------------------------------ between reservation and send

class Hooked(Direct):
    """The steps called directly, with something done just before the `at`-th call of one
    step (the world changing under the night) and, if asked, the process dying just after
    it. restate-owed runs for what earlier runs left only when they left a stored reminder
    (none on these first nights), then for each chunk of tonight's before it is delivered."""

    def __init__(self, before: Any, do: Callable[[], None], die: bool = False, at: int = 1) -> None:
        self.before, self.do, self.die, self.at, self.calls = before, do, die, at, 0

    def __call__(self, step: Any, *args: Any, **kwargs: Any) -> Any:
        if step is self.before:
            self.calls += 1
        mine = step is self.before and self.calls == self.at
        if mine:
            self.do()
        result = super().__call__(step, *args, **kwargs)
        if mine and self.die:
            raise Died
        return result


class Died(BaseException):
    """The process died here: nothing after it ran, nothing caught it."""


R1 = "dunning/i1/REMINDED_1"


def paid_between_reservation_and_send(store: Store, pay: Pay, row: Callable[[str], dict[str, Any]],
                                      crash: bool) -> None:
    """i1 (1,000.00) is reserved and its reminder stored; 400.00 is recorded before it is
    claimed. The reminder that goes states 600.00, once, under the same key and Message-ID —
    also when the night dies right after rendering it again (the next night sends it)."""
    seen: dict[str, Any] = {}

    def payment() -> None:
        seen.update(row(R1))  # the stored message, before the payment
        pay("i1", "400.00", "EUR", AS_OF)

    transport = FakeTransport()
    night = night_of(store, AS_OF, transport, dunning_delays=DELAYS, bounds=None)
    if crash:
        with pytest.raises(Died):
            run_night(night, Hooked(steps.restate_owed, payment, die=True))
        assert transport.handed == []
        assert "€600.00 (of €1,000.00" in row(R1)["body_text"]  # rendered again, stored, not claimed
        run(store, AS_OF, transport, dunning_delays=DELAYS, bounds=None)  # the next run sends it
    else:
        run_night(night, Hooked(steps.restate_owed, payment))
    assert transport.handed == [R1]
    sent = row(R1)
    assert sent["status"] == "sent" and sent["message_id"] == seen["message_id"]
    assert "Amount:      €1,000.00" in seen["body_text"]
    assert "Open amount: €600.00 (of €1,000.00, €400.00 received on 10 March 2027)" in sent["body_text"]


def paid_in_full_between_reservation_and_send(store: Store, pay: Pay, row: Callable[[str], dict[str, Any]]
                                              ) -> None:
    """Paid in full after the reminder was stored, before it was claimed: nothing goes, and
    the row says why."""
    transport = FakeTransport()
    run_night(night_of(store, AS_OF, transport, dunning_delays=DELAYS, bounds=None),
              Hooked(steps.restate_owed, lambda: pay("i1", "1000.00", "EUR", AS_OF)))
    assert transport.handed == []
    assert row(R1)["status"] == "failed" and "nothing left to pay" in row(R1)["error"]
    run(store, AS_OF + timedelta(days=8), transport, dunning_delays=DELAYS, bounds=None)
    assert transport.handed == []


def claimed_rows_keep_their_text(store: Store, pay: Pay, row: Callable[[str], dict[str, Any]]) -> None:
    """A reminder a delivery claimed (it may have left, G3) is never rendered again: the
    payment recorded while it was being sent leaves it as it was, for a person."""
    transport = FakeTransport(before_send=lambda key: pay("i1", "400.00", "EUR", AS_OF))
    run(store, AS_OF, transport, dunning_delays=DELAYS, bounds=None)
    assert transport.handed == [R1]
    assert "Amount:      €1,000.00" in row(R1)["body_text"]
