"""Dunning end to end: Prefect test server, real database, real SMTP server, and a
race on PostgreSQL against a payment landing between extraction and reservation."""

from __future__ import annotations

from datetime import date, timedelta

import pandas as pd
from sqlalchemy import text

from dueflow.flows.nightly_alerts import nightly_alerts
from dueflow.tasks.adapters import db
from dueflow.tasks.core.dunning_rule import due_dunning_steps
from dueflow.tasks.core.phrasebook import NOT_BEFORE_DUE, tones_for
from dueflow.tasks.core.tone import read_plan
from tests.helpers.concurrency import race
from tests.helpers.factories import client, insert, invoice, mark_paid, sourced

DAY0 = date(2027, 1, 4)


def day(n: int) -> date:
    return DAY0 + timedelta(days=n)


def test_dunning_calendar_delivers_exactly_the_expected_emails(run_env, smtp_sink, monkeypatch):
    url = run_env
    monkeypatch.setenv("DUEFLOW_TIMEZONE", "Europe/Madrid")
    monkeypatch.setenv("DUEFLOW_ESCALATION_TO", "collections@corp.example")
    insert(url, "clients", [client("en"), client("es", locale="es"),
                            client("paused", paused=True)])
    at_ten = "T10:00:00+00:00"
    insert(url, "invoices", [
        invoice("paid-early", "en", day(0).isoformat() + at_ten),
        invoice("paid-between", "en", day(0).isoformat() + at_ten),
        invoice("overdue", "en", day(0).isoformat() + at_ten),
        invoice("spanish", "es", day(2).isoformat() + at_ten),
        invoice("midnight", "en", day(0).isoformat() + "T23:30:00+00:00"),  # day 1 in Madrid
        invoice("void", "en", day(0).isoformat() + at_ten, status="void"),
        invoice("draft", "en", None, status="draft"),
        invoice("paused", "paused", day(0).isoformat() + at_ten),
    ])
    payments = {3: "paid-early", 9: "paid-between"}
    skipped, repeated = {12}, {7, 19}
    expected = {  # run day -> keys first received that day (delays 7, 5, 7)
        7: ["dunning/paid-between/REMINDED_1", "dunning/overdue/REMINDED_1"],
        8: ["dunning/midnight/REMINDED_1"],
        9: ["dunning/spanish/REMINDED_1"],
        13: ["dunning/overdue/REMINDED_2", "dunning/midnight/REMINDED_2"],  # day 12 skipped
        14: ["dunning/spanish/REMINDED_2"],
        20: ["dunning/overdue/OVERDUE", "dunning/midnight/OVERDUE"],
        21: ["dunning/spanish/OVERDUE"],
    }
    received_on: dict[int, list[str]] = {}
    for n in range(26):
        if n in payments:
            mark_paid(url, payments[n], day(n).isoformat() + at_ten)
        if n in skipped:
            continue
        for _ in range(2 if n in repeated else 1):
            before = set(smtp_sink.keys())
            summary = nightly_alerts(as_of=day(n))
            assert summary.failed == summary.pending == summary.quarantined == 0
            new = sorted(set(smtp_sink.keys()) - before)
            if new:
                received_on.setdefault(n, []).extend(new)
    assert received_on == {n: sorted(keys) for n, keys in expected.items()}
    assert len(smtp_sink.keys()) == len(set(smtp_sink.keys()))

    messages = smtp_sink.by_key()
    reminder = messages["dunning/spanish/REMINDED_1"]
    assert reminder["To"] == "es@clients.example"
    body = reminder.get_body(("plain",)).get_content()
    assert "F-spanish" in body and "980,40\xa0€" in body and "Vencimiento" in body
    firm = messages["dunning/overdue/REMINDED_2"].get_body(("plain",)).get_content()
    # The second reminder of an invoice not due yet: its facts say so, and its paragraph is
    # the rule's plan of reviewed sentences in a tone that does not press (NOT_BEFORE_DUE).
    assert "falls due in 42 days, on 28 February 2027" in firm
    plan = db.read_frame(db.engine_for(url), "SELECT tone_plan, paragraph FROM dueflow_ledger"
                         " WHERE key = 'dunning/overdue/REMINDED_2'", {}).iloc[0]
    tone = read_plan(plan["tone_plan"])
    assert tone is not None and tone.tone in tones_for("REMINDED_2", not_yet_due=True)
    assert tone.tone is not NOT_BEFORE_DUE["REMINDED_2"] and plan["paragraph"] in firm
    assert "without further delay" not in firm
    assert "overdue" not in firm.replace("F-overdue", "")  # day 13: not due yet
    escalation = messages["dunning/overdue/OVERDUE"]
    assert escalation["To"] == "collections@corp.example"
    history = escalation.get_body(("plain",)).get_content()
    assert "First reminder, 11 January 2027: sent" in history  # day 7
    assert "Second reminder, 17 January 2027: sent" in history  # day 13
    assert "REMINDED_" not in history and "dunning/" not in history
    assert "en@clients.example" in history and "€980.40" in history

    state = db.extract_frame(db.engine_for(url), sourced(url).source_statement("invoice_state"), {})
    states = dict(zip(state["invoice_id"], state["state"], strict=True))
    assert states == {"draft": "DRAFT", "midnight": "OVERDUE", "overdue": "OVERDUE",
                      "paid-between": "PAID", "paid-early": "PAID", "paused": "SENT",
                      "spanish": "OVERDUE", "void": "VOID"}


def test_overdue_without_escalation_address_is_quarantined_then_sent(run_env, smtp_sink,
                                                                      monkeypatch):
    url = run_env
    monkeypatch.delenv("DUEFLOW_ESCALATION_TO", raising=False)
    insert(url, "clients", [client("en")])
    insert(url, "invoices", [invoice("late", "en", day(0).isoformat() + "T10:00:00+00:00")])
    for n in (7, 12, 19):
        nightly_alerts(as_of=day(n))
    summary = nightly_alerts(as_of=day(20))
    assert summary.quarantined == 1 and summary.sent == 0
    assert "DUEFLOW_ESCALATION_TO" in summary.rows.loc[0, "detail"]
    monkeypatch.setenv("DUEFLOW_ESCALATION_TO", "collections@corp.example")
    summary = nightly_alerts(as_of=day(21))
    assert summary.sent == 1
    assert smtp_sink.keys() == [f"dunning/late/{s}" for s in ("REMINDED_1", "REMINDED_2", "OVERDUE")]


def test_payment_between_extraction_and_reservation_while_runs_race(pg_url):
    """Three runs extract and decide, then a payment commits, then all three reserve
    at once: the paid invoice gets nothing, every other invoice exactly one R1."""
    engine = db.engine_for(pg_url)
    db.init_db(engine, sample_tables=True)
    insert(pg_url, "clients", [client("en")])
    insert(pg_url, "invoices", [invoice(f"i{n}", "en", day(0).isoformat() + "T10:00:00+00:00")
                                for n in range(200)])
    decisions = []
    for _ in range(3):
        database = sourced(engine)
        invoices = db.extract_frame(engine, database.source_statement("extract_invoices"),
                                     {"as_of": day(7).isoformat()})
        clients = db.extract_frame(engine, database.source_statement("extract_clients"), {})
        history = db.extract_frame(engine, database.source_statement("dunning_history"), {})
        decisions.append(due_dunning_steps(invoices, clients, history, day(7)))
    assert all(len(d.to_reserve) == 200 for d in decisions)
    paid = [f"i{n}" for n in range(0, 200, 7)]
    for invoice_id in paid:
        mark_paid(pg_url, invoice_id, day(7).isoformat() + "T08:00:00+00:00")

    won = race(engine, [lambda d=d: db.reserve(sourced(engine), "dunning", d.to_reserve, day(7), None)
                        for d in decisions])
    winners = [k for w in won for k in w]
    assert len(winners) == len(set(winners))
    assert set(winners) == {f"dunning/i{n}/REMINDED_1" for n in range(200)} - {
        f"dunning/{p}/REMINDED_1" for p in paid}


def test_stale_runs_cannot_skip_or_repeat_a_step(db_url):
    engine = db.engine_for(db_url)
    insert(db_url, "clients", [client("en")])
    insert(db_url, "invoices", [invoice("x", "en", day(0).isoformat() + "T10:00:00+00:00")])

    def candidate(step: str, rank: int, previous_by: date) -> pd.DataFrame:
        return pd.DataFrame([{"key": f"dunning/x/{step}", "subject_id": "x", "cycle": "",
                              "step": step, "step_rank": rank, "recipient": "en@clients.example",
                              "previous_by": previous_by.isoformat()}])

    assert not db.reserve(sourced(engine), "dunning", candidate("REMINDED_2", 2, day(12)), day(12), None)
    assert db.reserve(sourced(engine), "dunning", candidate("REMINDED_1", 1, day(7)), day(7), None)
    # A run dated day 10 thinks R1 was on day 5 or earlier: too early for R2.
    assert not db.reserve(sourced(engine), "dunning", candidate("REMINDED_2", 2, day(5)), day(10), None)
    assert not db.reserve(sourced(engine), "dunning", candidate("OVERDUE", 3, day(19)), day(26), None)
    # The hold rule: while R1 has not gone out, R2 is never due, whatever the dates say.
    assert not db.reserve(sourced(engine), "dunning", candidate("REMINDED_2", 2, day(7)), day(12), None)
    with engine.begin() as conn:  # R1 goes out on day 8 (a retry by the run of day 8)
        conn.execute(text("UPDATE dueflow_ledger SET status = 'sent', attempt_as_of = :d"),
                     {"d": day(8).isoformat()})
    # A step is dated by the run that got it out: day 8, so R2 is not due on day 12.
    assert not db.reserve(sourced(engine), "dunning", candidate("REMINDED_2", 2, day(7)), day(12), None)
    assert db.reserve(sourced(engine), "dunning", candidate("REMINDED_2", 2, day(8)), day(13), None)
    assert not db.reserve(sourced(engine), "dunning", candidate("REMINDED_2", 2, day(8)), day(13), None)


def run_calendar(smtp_sink, days: list[int], **params) -> dict[int, list[str]]:
    """Run the night of each of these days (each boundary and the night before it, which
    is what can go wrong); what arrived on which day."""
    received_on: dict[int, list[str]] = {}
    for n in days:
        before = set(smtp_sink.keys())
        nightly_alerts(as_of=day(n), retry_backoff_minutes=0, **params)
        if new := sorted(set(smtp_sink.keys()) - before):
            received_on[n] = new
    return received_on


def test_a_step_that_did_not_go_out_holds_the_invoice(run_env, smtp_sink, monkeypatch):
    """The hold rule: REMINDED_1 is refused by the client's server for three nights; no
    REMINDED_2 comes while it is failed, and REMINDED_2 then counts its five days from
    the night REMINDED_1 really went out — and says that date."""
    url = run_env
    monkeypatch.setenv("DUEFLOW_ESCALATION_TO", "collections@corp.example")
    insert(url, "clients", [client("en"), client("ok")])
    insert(url, "invoices", [invoice("held", "en", day(0).isoformat() + "T10:00:00+00:00"),
                             invoice("free", "ok", day(0).isoformat() + "T10:00:00+00:00")])
    smtp_sink.faults["en@clients.example"] = "rcpt_451"
    refused = run_calendar(smtp_sink, [0, 6, 7, 8, 9], retry_max_attempts=9)
    smtp_sink.faults.clear()
    after = run_calendar(smtp_sink, [10, 11, 12, 14, 15, 18, 19, 21, 22, 29], retry_max_attempts=9)
    assert refused == {7: ["dunning/free/REMINDED_1"]}
    assert after == {10: ["dunning/held/REMINDED_1"], 12: ["dunning/free/REMINDED_2"],
                     15: ["dunning/held/REMINDED_2"], 19: ["dunning/free/OVERDUE"],
                     22: ["dunning/held/OVERDUE"]}
    second = smtp_sink.by_key()["dunning/held/REMINDED_2"].get_body(("plain",)).get_content()
    assert f"We wrote to you on {day(10).day} January 2027" in second
    history = smtp_sink.by_key()["dunning/held/OVERDUE"].get_body(("plain",)).get_content()
    assert f"First reminder, {day(10).day} January 2027: sent" in history  # dated when it went out
    steps = db.read_frame(db.engine_for(url), "SELECT key, attempts, as_of, attempt_as_of"
                          " FROM dueflow_ledger WHERE subject_id = 'held' ORDER BY step_rank", {})
    assert steps["attempts"].tolist() == [4, 1, 1]  # refused on days 7, 8, 9; sent on day 10
    assert str(steps["as_of"][0])[:10] == day(7).isoformat()
    assert str(steps["attempt_as_of"][0])[:10] == day(10).isoformat()


def test_dunning_can_count_from_the_due_date(run_env, smtp_sink, monkeypatch):
    """dunning_start='due': SENT is dated by due_date, so nothing is reminded before the
    invoice falls due, whenever it was sent."""
    url = run_env
    monkeypatch.setenv("DUEFLOW_ESCALATION_TO", "collections@corp.example")
    insert(url, "clients", [client("en")])
    insert(url, "invoices", [
        invoice("early", "en", day(0).isoformat() + "T10:00:00+00:00", due_date=day(20).isoformat()),
        invoice("late", "en", day(0).isoformat() + "T10:00:00+00:00", due_date=day(3).isoformat()),
        invoice("no-due", "en", day(0).isoformat() + "T10:00:00+00:00", due_date=None),
    ])
    received = run_calendar(smtp_sink, [0, 9, 10, 14, 15, 21, 22, 26, 27, 31, 32, 38, 39, 44],
                            dunning_start="due")
    assert received == {10: ["dunning/late/REMINDED_1"], 15: ["dunning/late/REMINDED_2"],
                        22: ["dunning/late/OVERDUE"], 27: ["dunning/early/REMINDED_1"],
                        32: ["dunning/early/REMINDED_2"], 39: ["dunning/early/OVERDUE"]}
    quarantine = db.quarantine_rows(db.engine_for(url))
    assert quarantine.set_index("source_id").loc["no-due", "reason"] == "due_date missing or not a valid date"
