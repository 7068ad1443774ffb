"""Whole nights in the unit layer (issue 37): the real night (tasks/night.py) and its steps,
on the in-memory ledger and sources, with a mail server in memory. Racing runs, crashes
between steps and mid-delivery, retries, holds, payments and bounces — each email once,
none lost — in milliseconds a night. The same contract holds the twin to SQLite and
PostgreSQL (tests/integration/test_store_contract.py)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import date, timedelta
from typing import Any

import pytest

from dueflow.blocks.settings import ConfigError
from dueflow.tasks import steps
from dueflow.tasks.adapters.memory import memory_store
from dueflow.tasks.core.ports import Store
from dueflow.tasks.core.statuses import SendResult, SendStatus
from dueflow.tasks.night import Direct, run_night
from tests.helpers.factories import client, contract, invoice
from tests.helpers.fakes import FakeTransport
from tests.helpers.nights import night_of, run

AS_OF = date(2027, 3, 10)
SENT = (AS_OF - timedelta(days=8)).isoformat()  # the first reminder is due tonight (7 days)
R1, R2, OVERDUE = ("dunning/i1/REMINDED_1", "dunning/i1/REMINDED_2", "dunning/i1/OVERDUE")
ALERT = f"renewal/c1/{AS_OF + timedelta(days=30)}/30d"


def company(**invoice_fields: Any) -> Store:
    return memory_store(contracts=[contract("c1", AS_OF + timedelta(days=30))],
                        clients=[client("cl1")], invoices=[invoice("i1", "cl1", SENT, **invoice_fields)])


def statuses(store: Store) -> dict[str, str]:
    return {key: row["status"] for key, row in store.ledger.rows.items()}  # type: ignore[attr-defined]


class Hooked(Direct):
    """The steps called directly, with something done just before one of them (the world
    changing under the night, or the process dying there)."""

    def __init__(self, step: Any, before: Callable[[], None]) -> None:
        self.step, self.before = step, before

    def __call__(self, step: Any, *args: Any, **kwargs: Any) -> Any:
        if step is self.step:
            self.before()
        return super().__call__(step, *args, **kwargs)


class Died(BaseException):
    """The process died here (SIGKILL, a lost machine): nothing after it ran, nothing
    caught it."""


def die() -> None:
    raise Died


def test_a_night_sends_each_due_email_once_and_its_rerun_nothing():
    store, transport = company(), FakeTransport()
    first = run(store, AS_OF, transport)
    again = run(store, AS_OF, transport)
    assert sorted(transport.handed) == sorted([ALERT, R1]) and first.sent == 2
    assert again.sent == 0 and statuses(store) == {ALERT: "sent", R1: "sent"}


def test_the_dunning_calendar_runs_to_the_escalation_one_step_a_night():
    store, transport = company(), FakeTransport()
    for offset in range(20):
        run(store, AS_OF + timedelta(days=offset), transport)
    assert transport.handed.count(R1) == transport.handed.count(R2) == transport.handed.count(OVERDUE) == 1
    dunning = [key for key in transport.handed if key.startswith("dunning/")]
    assert dunning == [R1, R2, OVERDUE]  # 7, then 5, then 7 days: in order, never two at once


def test_racing_nights_send_each_email_once():
    store = memory_store(clients=[client("cl1")],
                         contracts=[contract(f"c{n}", AS_OF + timedelta(days=30)) for n in range(30)],
                         invoices=[invoice(f"i{n}", "cl1", SENT) for n in range(30)])
    transport, barrier = FakeTransport(), threading.Barrier(3)
    summaries: list[Any] = []

    def night() -> None:
        barrier.wait()
        summaries.append(run(store, AS_OF, transport))

    racers = [threading.Thread(target=night) for _ in range(3)]
    for racer in racers:
        racer.start()
    for racer in racers:
        racer.join()
    assert len(transport.handed) == len(set(transport.handed)) == 60  # G1 without the run lock
    assert sum(summary.sent for summary in summaries) == 60


def test_a_night_that_dies_after_reserving_leaves_nothing_lost_and_nothing_twice():
    store, transport = company(), FakeTransport()
    with pytest.raises(Died):
        run_night(night_of(store, AS_OF, transport), Hooked(steps.compose_and_store, die))
    assert transport.handed == [] and set(statuses(store).values()) == {"pending"}  # reserved, not stored
    healed = run(store, AS_OF, transport)  # the next run renders them again and sends them, once
    assert sorted(transport.handed) == sorted([ALERT, R1]) and healed.sent == 2
    run(store, AS_OF + timedelta(days=1), transport)
    assert sorted(transport.handed) == sorted([ALERT, R1])


def test_a_night_that_dies_mid_delivery_never_sends_what_may_have_left_and_sends_the_rest():
    store = memory_store(clients=[client("cl1")], invoices=[invoice(f"i{n}", "cl1", SENT) for n in range(9)])
    handed: list[str] = []

    def dies_on_the_third(key: str) -> None:
        if len(handed) == 2:
            raise Died
        handed.append(key)

    with pytest.raises(Died):
        run_night(night_of(store, AS_OF, FakeTransport(before_send=dies_on_the_third)), Direct())
    rows = store.ledger.rows  # type: ignore[attr-defined]
    in_doubt = {key for key, row in rows.items() if row["status"] == "pending" and row["sending_at"]}
    unclaimed = {key for key, row in rows.items() if row["status"] == "pending" and not row["sending_at"]}
    assert handed[0] not in in_doubt and in_doubt and unclaimed  # what was recorded, what may have left
    transport = FakeTransport()
    later = run(store, AS_OF + timedelta(days=1), transport)
    assert set(transport.handed) == unclaimed  # surely never handed to SMTP: sent now, once (G3)
    assert not in_doubt & set(transport.handed)  # may have left: never again without a person
    assert later.ledger_pending == len(in_doubt)  # the summary says so, every night, until settled


def test_a_deferred_email_is_retried_the_next_night_to_the_address_the_data_now_says():
    store = company()
    refusing = FakeTransport(answers={R1: SendResult(SendStatus.FAILED, error="451 try later")})
    run(store, AS_OF, refusing)
    assert statuses(store)[R1] == "failed"
    store.sources.update("clients", "cl1", email="accounts@client.example")  # type: ignore[attr-defined]
    transport = FakeTransport()
    retried = run(store, AS_OF + timedelta(days=1), transport)
    assert transport.handed == [R1] and statuses(store)[R1] == "sent" and retried.sent == 1
    row = store.ledger.rows[R1]  # type: ignore[attr-defined]
    assert (row["recipient"], row["previous_recipient"]) == ("accounts@client.example", "cl1@clients.example")


def test_a_refused_address_waits_for_a_new_one_then_goes_once():
    store = company()
    run(store, AS_OF, FakeTransport(answers={R1: SendResult(SendStatus.FAILED, error="550 no user",
                                                            permanent=True)}))
    transport = FakeTransport()
    for offset in range(1, 4):  # the same address: never tried again
        run(store, AS_OF + timedelta(days=offset), transport)
    assert R1 not in transport.handed and statuses(store)[R1] == "failed"
    store.sources.update("clients", "cl1", email="fixed@client.example")  # type: ignore[attr-defined]
    run(store, AS_OF + timedelta(days=4), transport)
    assert transport.handed.count(R1) == 1 and statuses(store)[R1] == "sent"


def test_a_hold_stops_the_clock_and_the_step_comes_its_delay_after_the_hold_ends():
    hold_end = AS_OF + timedelta(days=4)
    store, transport = company(dunning_hold_until=hold_end.isoformat()), FakeTransport()
    for offset in range(12):
        run(store, AS_OF + timedelta(days=offset), transport)
    sent_on = {key: row["attempt_as_of"] for key, row in store.ledger.rows.items()}  # type: ignore[attr-defined]
    # The clock stood still while held: the first reminder comes its 7 days after the end.
    assert sent_on == {ALERT: AS_OF.isoformat(), R1: (hold_end + timedelta(days=7)).isoformat()}


def test_an_invoice_paid_after_the_extract_is_not_reminded():
    store, transport = company(), FakeTransport()

    def paid() -> None:
        store.sources.update("invoices", "i1", status="paid", paid_at=AS_OF.isoformat())  # type: ignore

    night = run_night(night_of(store, AS_OF, transport), Hooked(steps.reserve_slots, paid))
    assert transport.handed == [ALERT] and R1 not in statuses(store)  # the reservation re-checked it
    assert night.sent == 1


def test_a_bounced_reminder_is_never_followed_by_another_and_the_escalation_says_why():
    store, transport = company(), FakeTransport()
    run(store, AS_OF, transport)
    store.ledger.mark_bounced(R1, "5.1.1 unknown user")  # type: ignore[attr-defined]
    for offset in range(1, 20):
        run(store, AS_OF + timedelta(days=offset), transport)
    assert R2 not in transport.handed and transport.handed.count(OVERDUE) == 1
    assert statuses(store)[OVERDUE] == "sent"
    assert "5.1.1 unknown user" in store.ledger.rows[OVERDUE]["body_text"]  # type: ignore[attr-defined]


def test_ids_spelled_anew_stop_the_night_before_anything_is_written():
    store, transport = company(), FakeTransport()
    run(store, AS_OF, transport)
    store.sources.update("invoices", "i1", id="I1")  # type: ignore[attr-defined]
    before = dict(statuses(store))
    with pytest.raises(ConfigError, match=r"invoices: 1 id\(s\) .* \(i1 → I1\)"):
        run(store, AS_OF + timedelta(days=5), transport)
    assert statuses(store) == before and sorted(transport.handed) == sorted([ALERT, R1])


def test_a_dry_run_writes_nothing_adopt_sends_nothing_and_a_cap_defers_to_later_nights():
    store = memory_store(clients=[client("cl1")], invoices=[invoice(f"i{n}", "cl1", SENT) for n in range(7)])
    transport = FakeTransport()
    preview = run(store, AS_OF, transport, dry_run=True)
    assert (preview.rows["status"] == "would send").sum() == 7
    assert statuses(store) == {} and not transport.handed
    capped = run(store, AS_OF, transport, send_cap=3)
    assert capped.sent == 3 and len(transport.handed) == 3
    run(store, AS_OF + timedelta(days=1), transport, send_cap=3)
    run(store, AS_OF + timedelta(days=2), transport, send_cap=3)
    assert sorted(transport.handed) == sorted(f"dunning/i{n}/REMINDED_1" for n in range(7))
    taken_over = company()
    run(taken_over, AS_OF, transport := FakeTransport(), adopt=True)
    assert transport.handed == [] and set(statuses(taken_over).values()) == {"adopted"}
