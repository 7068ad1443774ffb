"""The dunning state machine (docs/design.md) as pure functions, with property tests."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from decimal import Decimal

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dueflow.tasks.adapters.memory import paid_columns
from dueflow.tasks.core.dunning_rule import due_dunning_steps
from tests import examples
from tests.helpers.calendar_scenarios import ESCALATION
from tests.helpers.calendar_scenarios import day as calendar_day
from tests.helpers.calendar_scenarios import scenarios as calendar_scenarios
from tests.helpers.oracles import InvoiceFacts, expected_dunning_emails

START = date(2027, 1, 1)
HISTORY_COLUMNS = ["subject_id", "step", "step_rank", "as_of", "status"]
CLIENTS = pd.DataFrame({
    "id": ["cl-en", "cl-es", "cl-paused"], "name": ["Acme", "Ñandú SL", "Paused Ltd"],
    "email": ["ap@acme.example", "pagos@nandu.example", "ap@paused.example"],
    "locale": ["en", "es", "en"], "notes": [None, None, None], "dunning_paused": [False, 0, True],
})


def invoices_frame(sent: list[date | None], paid: list[date | None] | None = None,
                   **overrides) -> pd.DataFrame:
    n = len(sent)
    frame = pd.DataFrame({
        "id": [f"inv-{i}" for i in range(n)], "client_id": ["cl-en"] * n,
        "number": [f"F-{i}" for i in range(n)], "amount": ["100.00"] * n, "currency": ["EUR"] * n,
        "status": ["sent"] * n,
        "sent_at": [datetime(s.year, s.month, s.day, 9, tzinfo=UTC).isoformat()
                    if s else None for s in sent],
        "due_date": [(s + timedelta(days=30)).isoformat() if s else None for s in sent],
        "paid_at": paid or [None] * n,
    })
    for column, values in overrides.items():
        frame[column] = values
    return frame


def simulate(sent, paid_on, run_dates, delays):
    history: list[tuple] = []
    emitted = []
    for run_date in run_dates:
        paid = [p.isoformat() if p is not None and p <= run_date else None for p in paid_on]
        decision = due_dunning_steps(
            invoices_frame(sent, paid), CLIENTS, pd.DataFrame(history, columns=HISTORY_COLUMNS),
            run_date, delays, escalation_to="collections@corp.example",
        )
        assert decision.quarantined.empty
        assert decision.due["subject_id"].is_unique  # one step per invoice per run
        for row in decision.to_reserve.itertuples(index=False):
            history.append((row.subject_id, row.step, row.step_rank, run_date.isoformat(), "sent"))
            emitted.append((run_date, int(row.subject_id[4:]), int(row.step_rank)))
    return emitted


@st.composite
def calendars(draw):
    delays = draw(st.lists(st.integers(1, 10), min_size=3, max_size=3))
    n = draw(st.integers(1, 6))
    sent = [START + timedelta(days=draw(st.integers(0, 20))) for _ in range(n)]
    paid_on = [draw(st.one_of(st.none(), st.integers(0, 60).map(lambda d: START + timedelta(days=d))))
               for _ in range(n)]
    steps = draw(st.lists(st.integers(0, 6), min_size=1, max_size=40))
    run_dates, day = [], START
    for step in steps:
        day += timedelta(days=step)
        run_dates.append(day)
    return sent, paid_on, run_dates, delays


@settings(max_examples=examples(10), deadline=None)
@given(calendars())
def test_steps_are_an_ordered_prefix_spaced_by_the_delays_and_stop_at_payment(calendar):
    sent, paid_on, run_dates, delays = calendar
    emitted = simulate(sent, paid_on, run_dates, delays)
    for invoice in range(len(sent)):
        mine = [(day, rank) for day, inv, rank in emitted if inv == invoice]
        ranks = [rank for _, rank in mine]
        assert ranks == list(range(1, len(ranks) + 1)), "not a prefix of R1, R2, OVERDUE"
        previous = sent[invoice]
        for (day, rank) in mine:
            assert (day - previous).days >= delays[rank - 1], "a step came too early"
            assert paid_on[invoice] is None or day < paid_on[invoice], "reminded after payment"
            previous = day
    # Exactness: each step goes out on the first run date it is due, never later (missed
    # nights delay it to the next run, they never burst several at once): the oracle.
    expected, _ = expected_dunning_emails(
        {f"inv-{i}": s for i, s in enumerate(sent)}, run_dates,
        lambda night, inv: InvoiceFacts(delays=delays, paid=paid_on[int(inv[4:])] is not None
                                        and paid_on[int(inv[4:])] <= night))
    assert emitted == [(day, int(inv[4:]), rank) for day, inv, rank in expected]


def test_paused_void_draft_and_paid_invoices_take_no_part():
    frame = invoices_frame([START] * 4, client_id=["cl-paused", "cl-en", "cl-en", "cl-en"],
                           status=["sent", "void", "draft", "paid"])
    decision = due_dunning_steps(frame, CLIENTS, pd.DataFrame(columns=HISTORY_COLUMNS),
                                 START + timedelta(days=30))
    assert decision.due.empty and decision.quarantined.empty


def test_sent_just_before_midnight_utc_counts_from_the_business_date():
    frame = invoices_frame([START])
    frame["sent_at"] = "2027-01-01T23:30:00+00:00"  # 00:30 on 2 January in Madrid
    none = pd.DataFrame(columns=HISTORY_COLUMNS)
    for tz, first_due in (("UTC", date(2027, 1, 8)), ("Europe/Madrid", date(2027, 1, 9))):
        assert due_dunning_steps(frame, CLIENTS, none, first_due - timedelta(days=1),
                                 timezone=tz).due.empty
        assert due_dunning_steps(frame, CLIENTS, none, first_due, timezone=tz).due["step"].tolist() \
            == ["REMINDED_1"]


def test_bad_invoices_are_quarantined_and_the_rest_proceed():
    frame = invoices_frame([START] * 6, client_id=["cl-en", "cl-en", "ghost", "cl-en", "cl-en",
                                                   "cl-en"],
                           amount=["10", None, "10", "10", "10", "10"],
                           currency=["EUR", "EUR", "EUR", "XXX", "EUR", "EUR"],
                           status=["sent", "sent", "sent", "sent", "sent", "disputed"])
    frame.loc[4, "sent_at"] = None
    decision = due_dunning_steps(frame, CLIENTS, pd.DataFrame(columns=HISTORY_COLUMNS),
                                 START + timedelta(days=10))
    assert dict(zip(decision.quarantined["source_id"], decision.quarantined["reason"],
                    strict=True)) == {
        "inv-1": "amount missing or not a number",
        "inv-2": "client 'ghost' not found",
        "inv-3": "unknown currency 'XXX'",
        "inv-4": "sent_at missing or not a valid timestamp",
        "inv-5": "unknown status 'disputed'",
    }
    assert decision.to_reserve["key"].tolist() == ["dunning/inv-0/REMINDED_1"]


@pytest.mark.parametrize("escalation_to", [None, "not an address"])
def test_overdue_without_an_escalation_address_is_quarantined_not_dropped(escalation_to):
    history = pd.DataFrame([("inv-0", "REMINDED_1", 1, "2027-01-08", "sent"),
                            ("inv-0", "REMINDED_2", 2, "2027-01-13", "sent")],
                           columns=HISTORY_COLUMNS)
    decision = due_dunning_steps(invoices_frame([START]), CLIENTS, history, date(2027, 1, 20),
                                 escalation_to=escalation_to)
    assert decision.due.empty
    assert decision.quarantined["reason"].tolist() == [
        "OVERDUE escalation needs DUEFLOW_ESCALATION_TO set to a valid address"]
    fixed = due_dunning_steps(invoices_frame([START]), CLIENTS, history, date(2027, 1, 20),
                              escalation_to="collections@corp.example")
    assert fixed.due[["step", "recipient"]].values.tolist() == [
        ["OVERDUE", "collections@corp.example"]]


@settings(max_examples=examples(8), deadline=None)
@given(calendar_scenarios(max_nights=24))
def test_holds_calendar_minimums_and_profiles_night_by_night_are_the_oracle(scenario):
    """Holds that start, end and are deleted mid-cycle, pauses with an end, business days,
    holidays, closures, business-day delays, minimums on the boundary, profiles switched
    between nights, and instalments and credit notes arriving between them: each email once,
    on the night the oracle says, to the right address, stating what is still owed."""
    history: list[tuple] = []
    emitted, skipped = [], []
    rules = scenario.rules()
    for night in map(calendar_day, scenario.nights):
        # What the client owes, as sql/dunning_candidates reads it (payments_of, in the twin).
        invoices = paid_columns(scenario.invoices(night), scenario.paid(night), night.isoformat())
        decision = due_dunning_steps(
            pd.DataFrame(invoices), pd.DataFrame(scenario.clients(night)),
            pd.DataFrame(history, columns=HISTORY_COLUMNS), night, (3, 2, 3), escalation_to=ESCALATION,
            rules=rules)
        assert decision.quarantined.empty
        assert decision.due["subject_id"].is_unique
        skipped += [(night, s) for s in decision.skipped["source_id"]]
        for row in decision.to_reserve.itertuples(index=False):
            owed = scenario.open_amount(night, int(row.subject_id.removeprefix("inv-")))
            assert Decimal(row.amount) == owed
            history.append((row.subject_id, row.step, row.step_rank, night.isoformat(), "sent"))
            emitted.append((night, row.subject_id, int(row.step_rank)))
            if row.step == "OVERDUE":
                assert row.recipient == scenario.escalation_of(night, row.subject_id)
            assert pd.Timestamp(row.due_since).date() <= night
    expected, expected_skipped = expected_dunning_emails(
        dict(zip(scenario.ids, map(calendar_day, scenario.sent), strict=True)),
        [calendar_day(n) for n in scenario.nights], scenario.facts, scenario.open_day)
    assert emitted == expected
    assert skipped == expected_skipped
    assert len(set((i, r) for _, i, r in emitted)) == len(emitted)  # each email once


def test_a_hold_moves_the_clock_to_its_end_and_a_deleted_hold_lifts_at_once():
    frame = invoices_frame([date(2027, 1, 1)], dunning_hold_until=["2027-01-10"])
    none = pd.DataFrame(columns=HISTORY_COLUMNS)
    due_on = [d for d in (date(2027, 1, n) for n in range(8, 20))
              if not due_dunning_steps(frame, CLIENTS, none, d).due.empty]
    assert due_on[0] == date(2027, 1, 17)  # its 7 days after the hold ends, not the morning after
    frame["dunning_hold_until"] = None  # deleted: as if never held, due now (sent 1 Jan)
    assert not due_dunning_steps(frame, CLIENTS, none, date(2027, 1, 9)).due.empty


def test_unreadable_holds_and_unknown_profiles_are_quarantined_with_the_reason():
    frame = invoices_frame([START] * 2, dunning_hold_until=["someday", None])
    clients = CLIENTS.assign(dunning_profile=["vip", None, None])
    decision = due_dunning_steps(frame.assign(client_id=["cl-en", "cl-en"]), clients,
                                 pd.DataFrame(columns=HISTORY_COLUMNS), START + timedelta(days=10))
    assert sorted(decision.quarantined["reason"]) == [
        "client dunning_profile 'vip' is not a known profile (DUEFLOW_PROFILES_FILE)",
        "dunning_hold_until is not a date: 'someday'"]


def test_the_forecast_lists_the_holds_the_decision_reads():
    from dueflow.tasks.core.forecast import held_invoices

    night = date(2027, 3, 10)
    invoices = pd.DataFrame({
        "id": ["i-hold", "i-pause", "i-both", "i-dup", "i-paid", "i-over", "i\r\nX: y"],
        "client_id": ["c1", "c2", "c2", "c3", "c1", "c1", "c1"],
        "dunning_hold_until": ["2027-03-20", None, "2027-03-12", None, "2027-04-01", "2027-03-10",
                               "2027-03-11"],
        "paid_at": [None, None, None, None, "2027-03-01T10:00:00+00:00", None, None],
    }, dtype=object)
    clients = pd.DataFrame({"id": ["c1", "c2", "c3", "c3"],
                            "dunning_paused_until": [None, "2027-03-15", "2027-05-01", None]}, dtype=object)
    held = held_invoices(invoices, clients, night, "UTC")
    # The decision's reading: a hold ending tonight is over, a duplicated client's pause does
    # not count (its invoices are quarantined), a paid invoice is not held; ids are shown on one line.
    assert held.to_dict("records") == [
        {"invoice_id": "i-hold", "client_id": "c1", "held_until": date(2027, 3, 20),
         "by": "invoice hold (dunning_hold_until)"},
        {"invoice_id": "i-pause", "client_id": "c2", "held_until": date(2027, 3, 15),
         "by": "client pause (dunning_paused_until)"},
        {"invoice_id": "i-both", "client_id": "c2", "held_until": date(2027, 3, 15),
         "by": "client pause (dunning_paused_until)"},
        {"invoice_id": held["invoice_id"].iloc[3], "client_id": "c1", "held_until": date(2027, 3, 11),
         "by": "invoice hold (dunning_hold_until)"},
    ]
    assert "\n" not in held["invoice_id"].iloc[3] and "\r" not in held["invoice_id"].iloc[3]
