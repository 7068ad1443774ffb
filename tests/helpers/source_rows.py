"""Contracts, clients and invoices around a night, drawn by hypothesis: renewals inside and
outside the leads, invoices at every dunning step's distance, and the kinds of bad rows the
rules quarantine (bad address, unknown currency, missing dates, duplicated ids, missing
clients). The forecast property and the store contract read the same rows."""

from __future__ import annotations

from datetime import date, timedelta

from hypothesis import strategies as st

from tests.helpers.factories import client, contract, invoice

START = date(2027, 3, 1)


def day(offset: int) -> date:
    return START + timedelta(days=offset)


@st.composite
def source_rows(draw: st.DrawFn) -> dict[str, list[dict]]:
    """Contracts, clients and invoices around START: renewals inside and outside the leads,
    invoices at every dunning step's distance, and the kinds of bad rows the rules quarantine
    (bad address, unknown currency, missing dates, duplicated ids, missing clients)."""
    contracts = []
    for n in range(draw(st.integers(0, 8))):
        cid = draw(st.sampled_from([f"c{n}", f"c{n}", "c-dup"]))
        renewal = draw(st.one_of(st.none(), st.integers(-3, 18).map(day)))
        contracts.append(contract(
            cid, renewal,
            status=draw(st.sampled_from(["active", "active", "active", "cancelled", "on hold"])),
            notify_email=draw(st.sampled_from([f"{cid}@example.com", "owner@example.com", "not-an-address"])),
            currency=draw(st.sampled_from(["EUR", "EUR", "USD", "XYZ"])), vendor=f"Vendor {n}"))
    clients = [client(f"cl{n}", locale=draw(st.sampled_from(["en", "es"])),
                      paused=draw(st.booleans()),
                      dunning_paused_until=draw(st.one_of(st.none(), st.integers(-3, 4).map(
                          lambda d: day(d).isoformat()))),
                      dunning_profile=draw(st.sampled_from([None, None, "brisk", "gentle", "ghost"])))
               for n in range(3)]
    invoices = []
    for n in range(draw(st.integers(0, 8))):
        sent = draw(st.one_of(st.none(), st.integers(-25, 2)))
        hour = draw(st.integers(0, 23))
        sent_at = None if sent is None else f"{day(sent).isoformat()}T{hour:02d}:30:00+00:00"
        invoices.append(invoice(
            draw(st.sampled_from([f"i{n}", f"i{n}", "i-dup"])),
            draw(st.sampled_from(["cl0", "cl0", "cl1", "cl2", "cl-missing"])), sent_at,
            status=draw(st.sampled_from(["sent", "sent", "sent", "draft", "void"])),
            due_date=day(draw(st.integers(-20, 5))).isoformat(),
            amount=draw(st.sampled_from(["980.40", "15.00", "4.99", "5.00", None])),
            dunning_hold_until=draw(st.one_of(st.none(), st.none(), st.integers(-3, 4).map(
                lambda d: day(d).isoformat())))))
    return {"contracts": contracts, "clients": clients, "invoices": invoices}
