"""A night that looks wrong waits for a person (issue 40): the bounds of an ordinary night
(tasks/core/guard.py) — an ordinary history never trips them, the accident finance teams
fear trips them before anything is written — and the night on the in-memory store: it
stops and says how to approve, and goes on with a person's word, once."""

from __future__ import annotations

from datetime import date, timedelta
from decimal import Decimal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dueflow.tasks.adapters.memory import memory_store
from dueflow.tasks.core.guard import (
    Approval,
    Bounds,
    Choice,
    Figures,
    approval_of,
    figures_from_json,
    figures_json,
    looks_wrong,
)
from dueflow.tasks.night import NightNeedsApproval
from tests.helpers.factories import client, invoice
from tests.helpers.fakes import FakeTransport
from tests.helpers.nights import run

BOUNDS = Bounds(min_emails=100, factor=5.0, open_share=0.5)
nights = st.lists(st.integers(1, 5_000), min_size=1, max_size=14)


@given(recent=nights, share=st.floats(0, 1), open_invoices=st.integers(1, 10**6))
def test_a_night_within_the_bounds_never_waits(recent, share, open_invoices):
    usual = sorted(recent)[len(recent) // 2]  # at most the median of the recent nights
    tonight = min(usual, int(BOUNDS.open_share * open_invoices))
    history = [Figures({"dunning": n}, {"dunning": {"EUR": Decimal(n) * 100}}, open_invoices)
               for n in recent]
    emails = int(tonight * share)
    figures = Figures({"dunning": emails}, {"dunning": {"EUR": Decimal(emails) * 100}}, open_invoices)
    assert looks_wrong(figures, history, BOUNDS) == []


@given(emails=st.integers(0, 100), first=st.booleans())
def test_a_night_under_the_minimum_never_waits_even_the_first(emails, first):
    history = [] if first else [Figures({"dunning": 1})]
    assert looks_wrong(Figures({"dunning": emails, "renewal": emails}, {}, 1), history, BOUNDS) == []


def test_the_accident_trips_every_bound_it_crosses_and_says_by_how_much():
    history = [Figures({"dunning": n}, {"dunning": {"EUR": Decimal("1000.00") * n}}, 4_000)
               for n in (9, 12, 11)]
    paid_set_unpaid = Figures({"dunning": 3_800}, {"dunning": {"EUR": Decimal("3800000.00")}}, 41_000)
    tripped = {t.bound: t.line() for t in looks_wrong(paid_set_unpaid, history, BOUNDS)}
    assert tripped == {
        "emails": "dunning: 3,800 emails tonight, against a median of 11 over the last 3 nights",
        "amount": "dunning: 3,800,000.00 EUR reminded tonight, against a median of 11,000.00 EUR over the"
                  " last 3 nights",
        "open invoices": "dunning: 41,000 open invoices tonight, against 4,000 on the last night"}
    first = looks_wrong(Figures({"renewal": 2_000}), [], BOUNDS)
    assert [t.line() for t in first] == [
        "renewal: 2,000 emails tonight, against no earlier night that sent any"]
    share = looks_wrong(Figures({"dunning": 600}, {}, 1_000), [Figures({"dunning": 500})], BOUNDS)
    assert [t.bound for t in share] == ["share"]


def test_a_persons_word_is_read_strictly_and_caps_the_night():
    assert approval_of("all", "ana") == Approval(Choice.ALL, "ana")
    assert approval_of(" None ", "ana").cap(None) == 0
    assert approval_of("10", "ana").cap(None) == 10 and approval_of("10", "ana").cap(3) == 3
    assert approval_of("all", "ana").cap(7) == 7
    for wrong in ("yes", "-3", "1.5", ""):
        with pytest.raises(ValueError, match="write all, none or a number"):
            approval_of(wrong, "ana")


def test_a_nights_figures_are_kept_as_they_were():
    amounts = {"dunning": {"EUR": Decimal("12.50"), "JPY": Decimal("500")}}
    figures = Figures({"dunning": 3, "renewal": 0}, amounts, 9)
    assert figures_from_json(figures_json(figures)) == figures


AS_OF = date(2027, 3, 10)
TIGHT = Bounds(min_emails=5, factor=3.0, open_share=0.9)


def sent(days_before: int, *names: str) -> list[dict]:
    """Invoices sent that many days before AS_OF: their first reminder is due 7 days after."""
    return [invoice(name, "cl1", (AS_OF - timedelta(days=days_before)).isoformat()) for name in names]


def test_the_night_stops_before_anything_is_written_and_goes_on_with_a_persons_word():
    store = memory_store(clients=[client("cl1")], invoices=sent(8, "i0", "i1"))
    for offset in (-3, -2, -1):  # ordinary nights: two reminders each
        store.sources.add(invoices=sent(8 - offset, f"d{offset}a", f"d{offset}b"))
        run(store, AS_OF + timedelta(days=offset), FakeTransport(), bounds=TIGHT)
    store.sources.add(invoices=sent(8, *(f"x{n}" for n in range(30))))  # paid invoices set unpaid
    before, transport = dict(store.ledger.rows), FakeTransport()
    with pytest.raises(NightNeedsApproval) as stopped:
        run(store, AS_OF, transport, bounds=TIGHT)
    assert stopped.value.review.tripped[0].line() == (
        "dunning: 30 emails tonight, against a median of 2 over the last 3 nights")
    said = str(stopped.value)
    assert "dueflow run --approve all" in said and "Nothing was reserved or sent" in said
    assert store.ledger.rows == before and transport.handed == []  # nothing written, nothing sent
    approved = run(store, AS_OF, transport, bounds=TIGHT, approval=Approval(Choice.UP_TO, "ana", 10))
    assert len(transport.handed) == len(set(transport.handed)) == 10 and approved.sent == 10
    assert approved.approval == "send up to 10 per job (approved by ana)"
    [kept] = [n for n in store.ledger.nights if n["as_of"] == AS_OF.isoformat()]
    assert (kept["choice"], kept["up_to"], kept["approved_by"]) == ("send up to", 10, "ana")
    again = run(store, AS_OF, FakeTransport(), bounds=TIGHT, approval=Approval(Choice.NONE, "ana"))
    assert again.sent == 0  # none: nothing more tonight, whoever runs it again
