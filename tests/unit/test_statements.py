"""One statement per client (issue 40, part 2; tasks/core/statements.py): which rows go as one,
and whole nights on the in-memory store — one email per client and kind, each invoice step
still once, whatever races, crashes, payments, refusals and bounces do to it."""

from __future__ import annotations

import threading
from collections import Counter
from datetime import date, timedelta
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dueflow.tasks import steps
from dueflow.tasks.adapters.memory import memory_store
from dueflow.tasks.core.frames import pd
from dueflow.tasks.core.parameters import Statements
from dueflow.tasks.core.ports import Store
from dueflow.tasks.core.statements import statement_keys
from dueflow.tasks.core.statuses import SendResult, SendStatus
from dueflow.tasks.night import Direct, run_night
from tests import examples
from tests.helpers.factories import client, invoice
from tests.helpers.fakes import FakeTransport
from tests.helpers.nights import night_of, run
from tests.helpers.oracles import expected_statements
from tests.unit.test_nights import Died, Hooked, statuses

AS_OF = date(2027, 3, 10)
SENT = (AS_OF - timedelta(days=8)).isoformat()
REMINDERS = {"DUEFLOW_STATEMENTS": "reminders"}
ALL = {"DUEFLOW_STATEMENTS": "all"}


def r1(invoice_id: str) -> str:
    return f"dunning/{invoice_id}/REMINDED_1"


def company(invoices: dict[str, list[str]]) -> Store:
    """Clients and their open invoices, each with its first reminder due tonight."""
    return memory_store(clients=[client(c) for c in invoices],
                        invoices=[invoice(i, c, SENT) for c, ids in invoices.items() for i in ids])


def rows(store: Store) -> dict[str, dict[str, Any]]:
    return store.ledger.rows  # type: ignore[attr-defined]


class Keeping(FakeTransport):
    """The in-memory mail server, keeping each email as handed over."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.emails: list[Any] = []

    def send(self, email: Any) -> SendResult:
        self.emails.append(email)
        return super().send(email)


class DiesBeforeDelivery(Direct):
    """The process dies once the night's messages are stored, before any is claimed."""

    def map(self, step: Any, items: Any, *shared: Any) -> Any:
        if step is steps.deliver_batch:
            raise Died
        return super().map(step, items, *shared)


# ------------------------------------------------------------------ which rows go as one


def due(*rows: tuple[str, str, str, str]) -> pd.DataFrame:
    return pd.DataFrame([{"key": k, "step": s, "client_id": c, "recipient": to, "locale": "en",
                          "cc_recipient": None} for k, s, c, to in rows])


def test_a_clients_reminders_of_one_night_go_as_one_and_the_rest_alone():
    rows_ = due(("dunning/b/REMINDED_2", "REMINDED_2", "cl1", "ap@one.example"),
                ("dunning/a/REMINDED_1", "REMINDED_1", "cl1", "AP@one.example"),
                ("dunning/c/REMINDED_1", "REMINDED_1", "cl2", "ap@two.example"),
                ("dunning/d/OVERDUE", "OVERDUE", "cl1", "collections@corp.example"),
                ("dunning/e/OVERDUE", "OVERDUE", "cl1", "collections@corp.example"))
    grouped = statement_keys(rows_, Statements.REMINDERS)
    assert grouped.tolist()[:2] == ["dunning/a/REMINDED_1"] * 2  # the smallest key carries it
    assert grouped.iloc[2:].isna().all()  # alone; escalations stay apart unless `all`
    everything = statement_keys(rows_, Statements.ALL)
    assert everything.iloc[3:].tolist() == ["dunning/d/OVERDUE"] * 2
    assert statement_keys(rows_, Statements.OFF).isna().all()


_ROWS = st.lists(st.tuples(st.sampled_from(["REMINDED_1", "REMINDED_2", "OVERDUE"]),
                           st.sampled_from(["cl1", "cl2", "cl3"]),
                           st.sampled_from(["a@x.example", "b@x.example"]),
                           st.sampled_from(["en", "es"]), st.sampled_from([None, "kam@corp.example"])),
                 max_size=25)


@settings(max_examples=examples(200), deadline=None)
@given(drawn=_ROWS, grouping=st.sampled_from(list(Statements)))
def test_every_statement_is_one_client_kind_address_and_language_of_two_or_more_keys(drawn, grouping):
    frame = pd.DataFrame([{"key": f"dunning/i{n}/{s}", "step": s, "client_id": c, "recipient": to,
                           "locale": loc, "cc_recipient": cc} for n, (s, c, to, loc, cc) in enumerate(drawn)],
                         columns=["key", "step", "client_id", "recipient", "locale", "cc_recipient"])
    carriers = statement_keys(frame, grouping)
    assert len(carriers) == len(frame)
    for carrier, members in frame.groupby(carriers.dropna()):
        assert len(members) >= 2 and carrier == min(members["key"]) and carrier in set(members["key"])
        assert members["client_id"].nunique() == members["recipient"].nunique() == 1
        assert members["cc_recipient"].astype("string").fillna("").nunique() == 1
        escalation = members["step"].eq("OVERDUE")
        assert escalation.all() or not escalation.any()  # reminders and escalations never mixed
        assert escalation.all() or members["locale"].nunique() == 1
        assert grouping == Statements.ALL or not escalation.any()
    # Rows that could share a statement do: nothing groupable is left alone beside its group.
    groupable = frame["step"].isin(["REMINDED_1", "REMINDED_2"] + (["OVERDUE"] if grouping == "all" else []))
    if grouping != Statements.OFF:
        kind = frame["step"].eq("OVERDUE")
        by = [frame["client_id"], kind, frame["recipient"], frame["cc_recipient"].astype("string").fillna(""),
              frame["locale"].where(~kind, "en")]
        sizes = frame["key"].groupby(by).transform("size")
        assert (carriers.notna() == (groupable & (sizes >= 2))).all()


# ------------------------------------------------------------------ whole nights


def test_one_email_per_client_lists_every_invoice_and_each_key_is_sent_once():
    store, transport = company({"cl1": ["i1", "i2", "i3"], "cl2": ["i4"]}), Keeping()
    night = run(store, AS_OF, transport, env=REMINDERS)
    assert sorted(transport.handed) == [r1("i1"), r1("i4")]  # the statement goes under its carrier
    statement = next(e for e in transport.emails if e.key == r1("i1"))
    assert all(f"F-i{n}" in statement.body_text for n in (1, 2, 3)) and "F-i4" not in statement.body_text
    assert "3 invoices" in statement.subject
    assert [r.key for r in statement.riders] == [r1("i2"), r1("i3")]  # their PDFs would ride along
    assert statuses(store) == dict.fromkeys(map(r1, ["i1", "i2", "i3", "i4"]), "sent")
    kept = {rows(store)[r1(n)]["message_id"] for n in ("i1", "i2", "i3")}
    assert len(kept) == 1 and rows(store)[r1("i2")]["body_text"] == statement.body_text  # stored as sent
    assert night.sent == 4 and Counter(night.rows["status"].astype(str))["sent"] == 4
    again = Keeping()
    run(store, AS_OF, again, env=REMINDERS)
    assert again.handed == []  # a rerun sends nothing


def test_a_statement_is_never_cut_across_the_nights_chunks(monkeypatch):
    """Tonight's keys are rendered and stored in chunks (tasks/night.py `chunks`); a client's
    invoices in the winners' order on either side of a cut still go as one statement."""
    from dueflow.tasks import night

    monkeypatch.setattr(night, "FIRST_CHUNK", 2)
    monkeypatch.setattr(night, "COMPOSE_CHUNK", 3)
    invoices = {"cl1": ["i1", "i5", "i9"], "cl2": ["i2"], "cl3": ["i3", "i4"], "cl4": ["i6", "i7", "i8"]}
    store, transport = company(invoices), Keeping()
    run(store, AS_OF, transport, env=REMINDERS)
    assert sorted(transport.handed) == [r1("i1"), r1("i2"), r1("i3"), r1("i6")]  # one email per client
    for email in transport.emails:
        client = next(c for c, ids in invoices.items() if email.key == r1(ids[0]))
        assert sorted(r.key for r in email.riders) == [r1(i) for i in invoices[client][1:]]
    assert statuses(store) == dict.fromkeys(map(r1, [i for ids in invoices.values() for i in ids]), "sent")


@given(st.lists(st.integers(0, 6), min_size=1, max_size=40), st.integers(1, 4), st.integers(1, 9))
@settings(max_examples=200, deadline=None)
def test_chunks_hold_every_winner_once_whole_emails_and_grow_to_their_bound(groups, first, bound):
    from dueflow.tasks import night

    winners = pd.DataFrame({"key": [f"k{i:02}" for i in range(len(groups))]})
    together = pd.Series([pd.NA if g == 0 else f"s{g}" for g in groups], dtype="string")
    old = night.FIRST_CHUNK, night.COMPOSE_CHUNK
    night.FIRST_CHUNK, night.COMPOSE_CHUNK = first, bound
    try:
        cut = night.chunks(winners, together)
    finally:
        night.FIRST_CHUNK, night.COMPOSE_CHUNK = old
    keys = [k for chunk in cut for k in chunk["key"]]
    assert sorted(keys) == list(winners["key"])  # every winner once
    of = dict(zip(winners["key"], together.fillna(""), strict=True))
    chunk_of = {k: n for n, chunk in enumerate(cut) for k in chunk["key"]}
    for g in set(together.dropna()):  # an email's rows in one chunk
        assert len({chunk_of[k] for k, v in of.items() if v == g}) == 1
    largest = max(groups.count(g) for g in set(groups) if g) if any(groups) else 1
    size = min(first, bound)
    for chunk in cut[:-1]:  # each chunk its size (or just over it, to end an email)
        assert size <= len(chunk) < size + largest
        size = min(2 * size, bound)


def test_racing_nights_never_send_an_invoice_twice_in_a_statement_or_alone():
    store = company({"cl1": [f"i{n:02}" for n in range(30)], "cl2": ["j1", "j2"]})
    transport, barrier = Keeping(), threading.Barrier(3)

    def night() -> None:
        barrier.wait()
        run(store, AS_OF, transport, env=REMINDERS)

    racers = [threading.Thread(target=night) for _ in range(3)]
    for racer in racers:
        racer.start()
    for racer in racers:
        racer.join()
    listed = [key for email in transport.emails for key in (email.key, *(r.key for r in email.riders))]
    assert sorted(listed) == sorted(rows(store)) and len(listed) == 32  # each key in exactly one email
    assert set(statuses(store).values()) == {"sent"}


def test_an_invoice_paid_before_its_statement_went_leaves_it_and_the_rest_go_once():
    store, transport = company({"cl1": ["i1", "i2", "i3"]}), Keeping()
    with pytest.raises(Died):  # stored, never handed to SMTP
        run_night(night_of(store, AS_OF, transport, env=REMINDERS), DiesBeforeDelivery())
    assert transport.handed == [] and rows(store)[r1("i3")]["statement_key"] == r1("i1")
    store.sources.update("invoices", "i1", status="paid", paid_at=AS_OF.isoformat())  # type: ignore
    run(store, AS_OF + timedelta(days=1), transport, env=REMINDERS)
    [statement] = transport.emails  # rendered again without the paid invoice, under a new carrier
    assert statement.key == r1("i2") and [r.key for r in statement.riders] == [r1("i3")]
    assert "F-i1" not in statement.body_text and "2 invoices" in statement.subject
    assert statuses(store) == {r1("i1"): "failed", r1("i2"): "sent", r1("i3"): "sent"}


def test_a_statement_stored_and_not_sent_goes_as_stored_the_next_night():
    store, transport = company({"cl1": ["i1", "i2"]}), Keeping()
    with pytest.raises(Died):
        run_night(night_of(store, AS_OF, transport, env=REMINDERS), DiesBeforeDelivery())
    stored = rows(store)[r1("i1")]["body_text"]
    run(store, AS_OF + timedelta(days=1), transport, env=REMINDERS)
    [statement] = transport.emails
    assert statement.body_text == stored and statuses(store) == dict.fromkeys([r1("i1"), r1("i2")], "sent")


def test_a_deferred_statement_is_retried_once_with_every_invoice():
    store = company({"cl1": ["i1", "i2"]})
    run(store, AS_OF, FakeTransport(answers={r1("i1"): SendResult(SendStatus.FAILED, error="451 later")}),
        env=REMINDERS)
    assert statuses(store) == dict.fromkeys([r1("i1"), r1("i2")], "failed")  # the outcome is each row's
    transport = Keeping()
    run(store, AS_OF + timedelta(days=1), transport, env=REMINDERS)
    [statement] = transport.emails
    assert [r.key for r in statement.riders] == [r1("i2")]
    assert statuses(store) == dict.fromkeys([r1("i1"), r1("i2")], "sent")


def test_a_statement_in_doubt_keeps_every_row_pending_and_a_person_settles_them_together():
    store = company({"cl1": ["i1", "i2"]})
    lost = SendResult(SendStatus.PENDING, error="lost after DATA")
    run(store, AS_OF, FakeTransport(answers={r1("i1"): lost}), env=REMINDERS)
    assert statuses(store) == dict.fromkeys([r1("i1"), r1("i2")], "pending")
    transport = Keeping()
    run(store, AS_OF + timedelta(days=1), transport, env=REMINDERS)
    assert transport.handed == []  # may have left: never again without a person (G3)
    assert store.ledger.resolve(r1("i2"), "sent", "the client confirmed")  # type: ignore[attr-defined]
    assert statuses(store) == dict.fromkeys([r1("i1"), r1("i2")], "sent")


def test_a_bounced_statement_stops_each_invoice_and_the_escalations_go_as_one():
    store, transport = company({"cl1": ["i1", "i2"]}), Keeping()
    run(store, AS_OF, transport, env=ALL)
    store.ledger.mark_bounced(r1("i1"), "5.1.1 unknown user")  # type: ignore[attr-defined]
    assert statuses(store) == dict.fromkeys([r1("i1"), r1("i2")], "bounced")
    for offset in range(1, 20):
        run(store, AS_OF + timedelta(days=offset), transport, env=ALL)
    sent = [e for e in transport.emails if e.key != r1("i1")]
    [escalation] = sent  # no second reminder for either; one escalation listing both
    assert escalation.key == "dunning/i1/OVERDUE"
    assert [r.key for r in escalation.riders] == ["dunning/i2/OVERDUE"]
    assert "5.1.1 unknown user" in escalation.body_text and "F-i2" in escalation.body_text


def test_with_statements_off_every_invoice_has_its_own_email():
    store, transport = company({"cl1": ["i1", "i2"]}), Keeping()
    run(store, AS_OF, transport)
    assert sorted(transport.handed) == [r1("i1"), r1("i2")] and not any(e.riders for e in transport.emails)


@settings(max_examples=examples(4), deadline=None)
@given(sent_days=st.lists(st.tuples(st.sampled_from(["cl1", "cl2", "cl3"]), st.integers(6, 12)),
                          min_size=1, max_size=9),
       grouping=st.sampled_from(["reminders", "all"]))
def test_statements_bundle_the_calendars_emails_and_change_none_of_them(sent_days, grouping):
    """The oracle of the calendar, extended: with statements, every invoice step goes on the
    night it goes without them, and the emails are the client's groups of that night
    (tests/helpers/oracles.py, expected_statements)."""
    start = AS_OF - timedelta(days=12)
    data = {"clients": [client(c) for c in ("cl1", "cl2", "cl3")],
            "invoices": [invoice(f"i{n}", c, (start + timedelta(days=d)).isoformat())
                         for n, (c, d) in enumerate(sent_days)]}
    nights = [AS_OF + timedelta(days=n) for n in range(14)]
    alone, bundled = memory_store(**data), memory_store(**data)
    alone_mail, bundled_mail = Keeping(), Keeping()
    for night in nights:
        run(alone, night, alone_mail)
        run(bundled, night, bundled_mail, env={"DUEFLOW_STATEMENTS": grouping})

    def emitted(store: Store) -> list[tuple[date, str, int]]:
        return sorted((date.fromisoformat(row["attempt_as_of"]), row["subject_id"], int(row["step_rank"]))
                      for row in rows(store).values())

    assert emitted(bundled) == emitted(alone)  # the calendar is the calendar's
    assert statuses(bundled) == statuses(alone)
    night_of_key = {key: date.fromisoformat(row["attempt_as_of"]) for key, row in rows(bundled).items()}
    subject = {key: row["subject_id"] for key, row in rows(bundled).items()}
    emails = sorted(((night_of_key[e.key], frozenset(subject[k] for k in (e.key, *(r.key for r in e.riders))))
                     for e in bundled_mail.emails), key=lambda e: (e[0], sorted(e[1])))
    client_of = {f"i{n}": c for n, (c, _) in enumerate(sent_days)}
    assert emails == expected_statements(emitted(alone), client_of.__getitem__, grouping)


def test_a_profile_chooses_statements_for_its_clients_over_the_setting(tmp_path):
    profiles = tmp_path / "profiles.toml"
    profiles.write_text('[profiles.apart]\nstatements = "off"\n[profiles.escalated]\nstatements = "all"\n')
    clients = [client("cl1"), client("cl2", dunning_profile="apart"),
               client("cl3", dunning_profile="escalated")]
    pairs = (("cl1", "a1"), ("cl1", "a2"), ("cl2", "b1"), ("cl2", "b2"), ("cl3", "c1"), ("cl3", "c2"))
    store = memory_store(clients=clients, invoices=[invoice(i, c, SENT) for c, i in pairs])
    transport = Keeping()
    env = {"DUEFLOW_PROFILES_FILE": str(profiles), "DUEFLOW_STATEMENTS": "reminders"}
    run(store, AS_OF, transport, env=env)
    assert sorted(transport.handed) == [r1("a1"), r1("b1"), r1("b2"), r1("c1")]  # cl2's profile: apart
    assert set(statuses(store).values()) == {"sent"} and len(statuses(store)) == 6


def test_a_statement_rendered_again_goes_once_whatever_group_its_rows_are_claimed_in():
    ids = [f"i{n:02}" for n in range(1, 13)]
    store, transport = company({"cl0": ["a0"], "cl1": ids}), Keeping()
    with pytest.raises(Died):
        run_night(night_of(store, AS_OF, transport, env=REMINDERS), DiesBeforeDelivery())
    store.sources.update("invoices", "i01", status="paid", paid_at=AS_OF.isoformat())  # type: ignore
    later = run(store, AS_OF + timedelta(days=1), transport, env=REMINDERS)
    # Twelve rows in batches of three: a0 alone first, then the statement's carrier and two
    # of its rows in one claim group — one email, never one per row.
    assert sorted(transport.handed) == [r1("a0"), r1("i02")]
    rest = dict.fromkeys(map(r1, ids[1:]), "sent")
    assert statuses(store) == {r1("a0"): "sent", r1("i01"): "failed"} | rest
    sent_rows = later.rows[later.rows["status"].astype(str) == "sent"]
    assert sorted(sent_rows["key"]) == [r1("a0"), *map(r1, ids[1:])]  # each row said once


def test_a_payment_on_one_invoice_before_the_statement_went_renders_the_whole_statement_again():
    """What the client still owes (issue 43) in a statement: a payment recorded after the
    statement was stored, before it was claimed, renders it again whole — the same rows, the
    same carrier and Message-ID, the new open amount — and it goes once."""
    store, transport = company({"cl1": ["i1", "i2"]}), Keeping()
    seen: dict[str, Any] = {}

    def payment() -> None:  # once the night's statement is stored (restate runs before reserving too)
        if r1("i2") in rows(store) and not seen:
            seen.update(rows(store)[r1("i2")])
            store.sources.pay("i2", "400.40", "EUR", AS_OF.isoformat())  # type: ignore[attr-defined]

    run_night(night_of(store, AS_OF, transport, env=REMINDERS), Hooked(steps.restate_owed, payment))
    [statement] = transport.emails
    assert statement.key == r1("i1") and [r.key for r in statement.riders] == [r1("i2")]
    assert statement.message_id == seen["message_id"] and "€580.00 (of €980.40" in statement.body_text
    assert "€580.00" not in seen["body_text"]  # stored before the payment, rendered again after it
    assert statuses(store) == dict.fromkeys([r1("i1"), r1("i2")], "sent")


def test_the_carriers_invoice_paid_in_full_before_the_statement_went_leaves_it():
    store, transport = company({"cl1": ["i1", "i2", "i3"]}), Keeping()
    pay = store.sources.pay  # type: ignore[attr-defined]

    def paid_in_full() -> None:  # once the night's statement is stored
        if r1("i1") in rows(store) and rows(store)[r1("i1")]["status"] == "pending":
            pay("i1", "980.40", "EUR", AS_OF.isoformat())

    run_night(night_of(store, AS_OF, transport, env=REMINDERS), Hooked(steps.restate_owed, paid_in_full))
    [statement] = transport.emails  # grouped anew under the next key, without the paid invoice
    assert statement.key == r1("i2") and [r.key for r in statement.riders] == [r1("i3")]
    assert "F-i1" not in statement.body_text
    assert statuses(store) == {r1("i1"): "failed", r1("i2"): "sent", r1("i3"): "sent"}
