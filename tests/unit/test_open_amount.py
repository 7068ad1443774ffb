"""What the client still owes (issue 43) on the in-memory twin: the open amount from
payments and credit notes arriving between nights, re-checked at reservation; the same
scenario runs on SQLite and PostgreSQL in tests/integration/test_open_amount.py."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dueflow.blocks.settings import Settings
from dueflow.tasks.adapters.memory import memory_store
from dueflow.tasks.core.frames import pd
from dueflow.tasks.core.open_amount import owed, units_of
from dueflow.tasks.jobs import night_jobs
from tests import examples
from tests.helpers.factories import client, invoice
from tests.helpers.fakes import FakeTransport
from tests.helpers.nights import ENV, parameters, run
from tests.helpers.payments import (
    AS_OF,
    CLIENTS,
    DELAYS,
    INVOICES,
    SENT,
    check_nights,
    claimed_rows_keep_their_text,
    memory_pay,
    nights_with_payments,
    paid_between_reservation_and_send,
    paid_in_full_between_reservation_and_send,
)


def test_payments_and_credit_notes_between_nights_on_the_twin():
    store = memory_store(clients=CLIENTS, invoices=INVOICES)
    ledger = store.ledger

    def body(key: str) -> str:
        return ledger.rows[key]["body_text"]  # type: ignore[attr-defined]

    def reasons() -> dict[str, str]:
        return {source: reason for _job, source, reason in ledger.quarantined}  # type: ignore[attr-defined]

    check_nights(nights_with_payments(store, memory_pay(store), body, reasons))


def test_a_payment_recorded_between_the_extract_and_the_reservation_stops_that_nights_reminder():
    store = memory_store(clients=CLIENTS, invoices=INVOICES[:2])
    _, dunning = night_jobs(Settings.from_env(ENV), parameters(dunning_delays=DELAYS), "secret")
    due = dunning.decide(dunning.extract(store, AS_OF), AS_OF).due
    assert sorted(due["amount"]) == ["1000.00", "1000.00"]
    memory_pay(store)("i1", "1000.00", "EUR", AS_OF)  # paid in full while the night runs
    won = store.ledger.reserve("dunning", due, AS_OF, "run")
    assert won == {"dunning/i2/REMINDED_1"}  # i1's open amount changed: not reserved
    memory_pay(store)("i2", "10.00", "EUR", AS_OF + timedelta(days=1))  # after the night: no change
    later = run(store, AS_OF + timedelta(days=1), FakeTransport(), dunning_delays=DELAYS, bounds=None)
    assert later.sent == 1


def test_the_open_amount_of_each_way_a_company_keeps_it():
    rows = pd.DataFrame({
        "amount": ["1000.00", "1000.00", "500", "100", "1000.00", "1000.00", "100"],
        "currency": ["EUR", "EUR", "EUR", "JPY", "EUR", "EUR", "EUR"],
        "amount_open": [None, None, None, "40", None, "abc", None],
        "amount_paid": [None, None, "200", None, None, None, None],
        "paid_e4": [4000000, "10000000", None, None, None, None, None],
        "credited_e4": [None, None, None, None, 1000, None, None],
        "paid_last": ["2027-03-03", "2027-03-04", None, None, None, None, None],
        "paid_currency_low": ["EUR", "EUR", None, None, "EUR", None, "EUR"],
        "paid_currency_high": ["EUR", "EUR", None, None, "EUR", None, "EUR"],
        "payments_unreadable": [0, 0, None, None, 0, None, 1]})
    left = owed(rows)
    assert left.open.tolist()[:5] == ["600.00", "0.00", "300.00", "40", "999.90"]
    assert left.settled.tolist() == [False, True, False, False, False, False, False]
    assert left.received.tolist()[:4] == ["400.00", "1000.00", "200.00", "60"]
    assert left.credited.tolist()[4] == "0.10"
    assert left.problem.tolist()[5] == "amount_open is not a number: abc"
    assert left.problem.tolist()[6].startswith("1 payment(s) of this invoice cannot be read")
    assert left.problem.isna().tolist()[:5] == [True] * 5


def test_amounts_are_read_as_exact_units_whatever_the_scale_of_the_numeric():
    units = units_of(pd.Series(["18.6400000000000000", "1.00005", "-0.5", "x", "100", None]))
    assert units.astype(object).where(units.notna(), None).tolist() == [
        186400, None, -5000, None, 1000000, None]


amounts = st.decimals(min_value=Decimal("0.01"), max_value=Decimal("99999.99"), places=2)


@settings(max_examples=examples(60), deadline=None)
@given(total=amounts,
       payments=st.lists(st.tuples(amounts, st.integers(-6, 3), st.booleans()), max_size=4))
def test_every_email_states_the_amount_less_what_was_received_by_the_night_exactly(total, payments):
    """The amount in every email is amount − payments (and credit notes) received up to the
    night, exactly, in Decimal; nothing is sent when nothing is left, and more received than
    owed is quarantined, never guessed."""
    store = memory_store(clients=[client("cl1")], invoices=[invoice("i1", "cl1", SENT, amount=str(total))])
    counted = Decimal(0)
    for amount, day, credit in payments:
        value = -amount if credit else amount
        memory_pay(store)("i1", str(value), "EUR", AS_OF + timedelta(days=day))
        if day <= 0:
            counted += amount
    transport = FakeTransport()
    summary = run(store, AS_OF, transport, dunning_delays=DELAYS, bounds=None)
    left = total - counted
    if left > 0:
        assert transport.handed == ["dunning/i1/REMINDED_1"]
        [stated] = summary.rows.loc[summary.rows["key"] == "dunning/i1/REMINDED_1", "amount"].tolist()
        assert Decimal(str(stated)) == left
        body = store.ledger.rows["dunning/i1/REMINDED_1"]["body_text"]  # type: ignore[attr-defined]
        assert f"€{left:,.2f}" in body
    else:
        assert transport.handed == []
        assert summary.quarantined == (left < 0)


def test_the_minimum_reads_the_open_amount():
    store = memory_store(clients=CLIENTS, invoices=INVOICES[:1])
    memory_pay(store)("i1", "996.00", "EUR", AS_OF - timedelta(days=1))
    summary = run(store, AS_OF, FakeTransport(), dunning_delays=DELAYS, bounds=None,
                  env={"DUEFLOW_DUNNING_MINIMUM": "EUR 5"})
    assert summary.sent == 0  # 4.00 EUR open, below the minimum of 5
    other = memory_store(clients=CLIENTS, invoices=INVOICES[:1])
    memory_pay(other)("i1", "994.00", "EUR", AS_OF - timedelta(days=1))  # 6.00 open: above it
    assert run(other, AS_OF, FakeTransport(), dunning_delays=DELAYS, bounds=None,
               env={"DUEFLOW_DUNNING_MINIMUM": "EUR 5"}).sent == 1


@pytest.mark.parametrize("crash", [False, True], ids=["sent", "died-after-rendering-again"])
def test_a_payment_between_reservation_and_send_is_rendered_again_under_the_same_key(crash):
    store = memory_store(clients=CLIENTS, invoices=INVOICES[:1])
    paid_between_reservation_and_send(store, memory_pay(store), row_of(store), crash)


def test_paid_in_full_between_reservation_and_send_nothing_goes():
    store = memory_store(clients=CLIENTS, invoices=INVOICES[:1])
    paid_in_full_between_reservation_and_send(store, memory_pay(store), row_of(store))


def test_a_claimed_reminder_keeps_its_text():
    store = memory_store(clients=CLIENTS, invoices=INVOICES[:1])
    claimed_rows_keep_their_text(store, memory_pay(store), row_of(store))


def row_of(store):
    return lambda key: dict(store.ledger.rows[key])
