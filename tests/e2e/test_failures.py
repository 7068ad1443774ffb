"""Every failure ends in a known state (G3, G4): SMTP faults injected at the protocol
level, bounded retries of what surely failed, and operators settling what is unknown."""

from __future__ import annotations

from datetime import date, timedelta

import pandas as pd
from sqlalchemy import text

from dueflow.blocks.endpoints import parse_mail_url
from dueflow.flows.nightly_alerts import nightly_alerts
from dueflow.tasks.adapters import db
from dueflow.tasks.adapters.db import Database
from dueflow.tasks.adapters.sql_store import SqlLedger, sql_store
from dueflow.tasks.core.addresses import Mailbox
from dueflow.tasks.core.message import OutgoingEmail, message_id_for
from dueflow.tasks.core.outcomes import utc_stamp
from dueflow.tasks.deliver import DeliverySettings, Recipient
from dueflow.tasks.jobs import DunningJob, RenewalJob
from dueflow.tasks.steps import deliver_batch, retry_failed
from tests.helpers.concurrency import race
from tests.helpers.factories import client, contract, insert, invoice, sourced
from tests.helpers.smtp_server import free_port

SENDER = Mailbox("alerts@dueflow.test")

AS_OF = date(2027, 1, 1)
RENEWAL = AS_OF + timedelta(days=30)
MODEL_PLAN = ('{"tone": "appreciative", "sentences": ["open.any.moment", "body.appreciative.trust",'
              ' "close.thanks.help"], "client": "new"}')
MODEL_PARAGRAPH = (
    "Thank you for taking a moment to read this message. We are grateful for your trust and for your"
    " attention to this reminder. We appreciate your help with this.")


def key(cid: str) -> str:
    return f"renewal/{cid}/{RENEWAL}/30d"


def statuses(url: str) -> dict[str, str]:
    ledger = db.ledger_rows(db.engine_for(url))
    return dict(zip(ledger["key"], ledger["status"], strict=True))


def test_a_run_whose_emails_need_a_person_ends_failed_by_default_with_its_summary(run_env, smtp_sink,
                                                                                   monkeypatch):
    """DUEFLOW_ATTENTION_STATE's default (the suite sets `completed`, tests/conftest.py): a
    failed email makes the run's final state Failed "Needs attention" — red in the UI — and
    the state still holds the summary; calling the flow raises NeedsAttention with it."""
    import pytest

    from dueflow.tasks.core.report import NeedsAttention, summary_of

    monkeypatch.delenv("DUEFLOW_ATTENTION_STATE")
    insert(run_env, "contracts", [contract(c, RENEWAL) for c in ["ok1", "refused"]])
    smtp_sink.faults["refused@example.com"] = "rcpt_550"
    state = nightly_alerts(as_of=AS_OF, return_state=True)
    assert (state.type.value, state.name) == ("FAILED", "Needs attention")
    summary = summary_of(state)
    assert (summary.sent, summary.failed) == (1, 1) and state.message == summary.headline()
    with pytest.raises(NeedsAttention, match="1 sent, 1 failed") as raised:
        state.result()
    assert raised.value.summary.failed == 1


def test_each_fault_ends_sent_once_or_visibly_pending_or_failed(run_env, smtp_sink, monkeypatch):
    url = run_env
    faults = {"rcpt451": "rcpt_451", "data554": "data_554", "drop": "drop_before_data_reply"}
    insert(url, "contracts", [contract(c, RENEWAL) for c in ["ok1", "ok2", *faults]])
    for cid, fault in faults.items():
        smtp_sink.faults[f"{cid}@example.com"] = fault
    nightly_alerts(as_of=AS_OF, retry_backoff_minutes=0)
    assert statuses(url) == {key("ok1"): "sent", key("ok2"): "sent", key("rcpt451"): "failed",
                             key("data554"): "failed", key("drop"): "pending"}
    ledger = db.ledger_rows(db.engine_for(url)).set_index("key")
    assert "451" in ledger.loc[key("rcpt451"), "error"]
    assert "554" in ledger.loc[key("data554"), "error"]
    assert "outcome unknown after DATA" in ledger.loc[key("drop"), "error"]

    # The server heals. The transient failure is retried and sent; the permanent
    # 5xx refusal is not; the pending one (maybe delivered) is never resent.
    smtp_sink.faults.clear()
    again = nightly_alerts(as_of=AS_OF, retry_backoff_minutes=0)
    assert again.retried == 1 and again.sent == 1 and again.won == 0
    assert statuses(url)[key("rcpt451")] == "sent"
    assert statuses(url)[key("data554")] == "failed" and statuses(url)[key("drop")] == "pending"
    received = smtp_sink.keys()
    assert sorted(received) == sorted([key("ok1"), key("ok2"), key("rcpt451")])
    assert smtp_sink.data_seen.count(key("drop")) == 1  # it did reach the server once
    retried = smtp_sink.by_key()[key("rcpt451")]
    assert retried["Message-ID"] == db.read_frame(
        db.engine_for(url), "SELECT message_id FROM dueflow_ledger WHERE key = :k",
        {"k": key("rcpt451")})["message_id"][0]
    assert again.ledger_pending == 1 and again.ledger_failed == 1


def test_server_down_fails_every_key_and_retries_are_bounded(run_env, monkeypatch):
    url = run_env
    monkeypatch.setenv("DUEFLOW_MAIL_URL", f"smtp://127.0.0.1:{free_port()}")  # nobody listens
    insert(url, "contracts", [contract(c, RENEWAL) for c in ["a", "b"]])
    first = nightly_alerts(as_of=AS_OF, retry_backoff_minutes=0, retry_max_attempts=3)
    assert first.failed == 2 and "Connection refused" in first.rows["detail"].iloc[0]
    for _ in range(4):
        nightly_alerts(as_of=AS_OF, retry_backoff_minutes=0, retry_max_attempts=3)
    ledger = db.ledger_rows(db.engine_for(url))
    assert ledger["attempts"].tolist() == [3, 3]  # bounded: no fourth attempt
    assert set(ledger["status"]) == {"failed"}


def test_backoff_holds_a_retry_until_it_passes(run_env, smtp_sink):
    url = run_env
    insert(url, "contracts", [contract("a", RENEWAL)])
    smtp_sink.faults["a@example.com"] = "rcpt_451"
    nightly_alerts(as_of=AS_OF, retry_backoff_minutes=60)
    smtp_sink.faults.clear()
    held = nightly_alerts(as_of=AS_OF, retry_backoff_minutes=60)
    assert held.retried == 0 and statuses(url)[key("a")] == "failed"
    with db.engine_for(url).begin() as conn:  # an hour later
        conn.execute(text("UPDATE dueflow_ledger SET retry_after = :t"),
                     {"t": utc_stamp(pd.Timestamp("2000-01-01", tz="UTC").to_pydatetime())})
    assert nightly_alerts(as_of=AS_OF, retry_backoff_minutes=60).retried == 1
    assert smtp_sink.keys() == [key("a")]


def test_a_retry_stops_when_the_invoice_was_paid_meanwhile(run_env, smtp_sink):
    url = run_env
    insert(url, "clients", [{"id": "cl", "name": "Client", "email": "cl@clients.example",
                             "locale": "en", "notes": None, "dunning_paused": False}])
    insert(url, "invoices", [{"id": "inv", "client_id": "cl", "number": "F-1", "amount": "10",
                              "currency": "EUR", "status": "sent",
                              "sent_at": "2026-12-01T10:00:00+00:00", "due_date": "2026-12-31",
                              "paid_at": None}])
    smtp_sink.faults["cl@clients.example"] = "rcpt_451"
    assert nightly_alerts(as_of=AS_OF, retry_backoff_minutes=0).failed == 1
    with db.engine_for(url).begin() as conn:
        conn.execute(text("UPDATE invoices SET status = 'paid', paid_at = '2027-01-01T12:00:00+00:00'"))
    smtp_sink.faults.clear()
    assert nightly_alerts(as_of=AS_OF, retry_backoff_minutes=0).retried == 0
    assert smtp_sink.keys() == []


def reserved(db_url: str, ids: list[str], store: bool = True) -> list[OutgoingEmail]:
    """Reserve a 30-day alert for each contract id, with its message stored (as the flow
    does before delivery); returns the stored emails."""
    engine = db.engine_for(db_url)
    db.reserve(sourced(engine), "renewal", pd.DataFrame({
        "key": [key(c) for c in ids], "subject_id": ids, "cycle": RENEWAL.isoformat(),
        "step": "30d", "step_rank": 30, "recipient": [f"{c}@example.com" for c in ids],
        "previous_by": None}), AS_OF, None)
    emails = [OutgoingEmail(key(c), f"{c}@example.com", "Renewal", "text", "<p>html</p>",
                            message_id_for(key(c), SENDER)) for c in ids]
    if store:
        db.store_messages(engine, [e.as_row() for e in emails])
    return emails


def delivery_settings(db_url: str, port: int) -> DeliverySettings:
    return DeliverySettings(parse_mail_url(f"smtp://127.0.0.1:{port}"), SENDER, SqlLedger(Database(db_url)),
                            AS_OF, timedelta(0))


def test_concurrent_requeues_never_retry_the_same_row(db_url):
    engine = db.engine_for(db_url)
    ids = [f"c{n}" for n in range(300)]
    insert(db_url, "contracts", [contract(c, RENEWAL) for c in ids])
    emails = reserved(db_url, ids)
    with engine.begin() as conn:
        conn.execute(text("UPDATE dueflow_ledger SET status = 'failed', error = '451 later'"))
    messages = [e.as_row() for e in emails]
    requeued = race(engine, [
        lambda i=i: db.requeue_failed(sourced(engine), f"run-{i}", messages) for i in range(4)])
    everything = [k for keys in requeued for k in keys]
    assert sorted(everything) == sorted(key(c) for c in ids)  # each requeued exactly once
    ledger = db.ledger_rows(engine)
    assert set(ledger["status"]) == {"pending"}
    assert ledger["subject"].notna().all()  # its message stored in the same transaction


def test_a_batch_executed_twice_sends_nothing_twice(db_url, smtp_sink):
    """A task runner may run a delivery batch again (a lost Dask worker, a re-run task):
    the batch claims its rows before sending, so the second execution sends none."""
    ids = [f"c{n}" for n in range(5)]
    insert(db_url, "contracts", [contract(c, RENEWAL) for c in ids])
    emails = reserved(db_url, ids)
    smtp_sink.faults["c4@example.com"] = "drop_before_data_reply"  # unknown outcome: pending
    settings = delivery_settings(db_url, smtp_sink.port)
    items = [Recipient(e.key, e.recipient) for e in emails]

    first = deliver_batch.fn(items, settings)
    again = deliver_batch.fn(items, settings)

    assert sorted(smtp_sink.keys()) == sorted(key(c) for c in ids[:4])  # each once
    assert [d.status for d in first] == ["sent"] * 4 + ["pending"]
    assert [d.status for d in again] == ["already handled"] * 4 + ["pending"]  # c4 is in doubt
    assert all("not sent again" in (d.detail or "") for d in again)
    # An operator settles the unknown one as failed: the next attempt sends it.
    engine = db.engine_for(db_url)
    db.resolve_pending(engine, key("c4"), "failed", "operator: not received")
    smtp_sink.faults.clear()
    jobs = (RenewalJob((30,), "en", SENDER), DunningJob((7, 5, 7), "sent", "UTC", None, SENDER))
    # rendered again from the contract
    assert retry_failed.fn(sql_store(sourced(engine)), jobs, AS_OF, None, 3, timedelta(0)) == []
    assert db.ledger_rows(engine).set_index("key").loc[key("c4"), "status"] == "pending"
    retried = deliver_batch.fn(items, settings)
    assert [(d.key, d.status) for d in retried if d.status == "sent"] == [(key("c4"), "sent")]
    assert sorted(smtp_sink.keys()) == sorted(key(c) for c in ids)
    assert db.ledger_rows(engine).set_index("key").loc[key("c4"), "attempts"] == 1  # counted anew


def test_report_tells_pending_rows_never_handed_to_smtp(db_url, smtp_sink):
    """A pending row no delivery claimed was surely not sent; one it claimed may have
    been: the run report tells them apart for the operator."""
    from dueflow.tasks.core.report import ROW_COLUMNS, markdown, summarize

    engine = db.engine_for(db_url)
    emails = reserved(db_url, ["lost", "unknown"])
    smtp_sink.faults["unknown@example.com"] = "drop_before_data_reply"
    deliver_batch.fn([Recipient(emails[1].key, emails[1].recipient)],
                     delivery_settings(db_url, smtp_sink.port))
    report = markdown(summarize(AS_OF, False, None, pd.DataFrame(columns=list(ROW_COLUMNS)),
                                db.unsettled_counts(engine), db.unsettled_rows(engine)))
    lines = {line.split("`")[1]: line for line in report.splitlines()
             if line.startswith(("| pending |", "| not sent |"))}
    # Never handed to SMTP: "not sent", the next run sends it; handed over: "pending".
    assert lines[key("lost")].startswith("| not sent | nothing: the next run sends it |")
    assert lines[key("unknown")].startswith("| pending | check the mail server's log")
    assert db.unsettled_counts(engine) == {"pending": 1, "failed": 0, "permanent": 0, "unsent": 1,
                                           "bounced": 0}


def test_a_retry_goes_where_the_data_now_says(run_env, smtp_sink):
    """Issue 25, finding 10: an operator fixes an address after a definite failure; the
    retry goes to the new address (a permanent refusal too, since the address changed),
    rendered again with the paragraph the model drafted, and the ledger keeps both
    addresses. A refusal whose address did not change is not tried again; a pending row
    (maybe delivered) is never sent again, whatever its address says now."""
    url = run_env
    insert(url, "contracts", [contract(c, RENEWAL) for c in ["moved", "refused", "unchanged", "doubt"]])
    insert(url, "clients", [client("cl")])
    insert(url, "invoices", [invoice("inv", "cl", "2026-11-01T10:00:00+00:00", due_date="2026-12-20")])
    smtp_sink.faults |= {"moved@example.com": "rcpt_451", "refused@example.com": "rcpt_550",
                         "unchanged@example.com": "rcpt_550", "doubt@example.com": "drop_before_data_reply",
                         "cl@clients.example": "rcpt_550"}
    nightly_alerts(as_of=AS_OF, retry_backoff_minutes=0)
    dunning_key = "dunning/inv/REMINDED_1"
    assert statuses(url)[dunning_key] == "failed"
    with db.engine_for(url).begin() as conn:  # the model's plan, as a planning run stores it
        conn.execute(text("UPDATE dueflow_ledger SET draft_source = 'model', tone_plan = :plan,"
                          " paragraph = :p WHERE key = :k"),
                     {"plan": MODEL_PLAN, "p": MODEL_PARAGRAPH, "k": dunning_key})
        for cid in ["moved", "refused", "doubt"]:
            conn.execute(text("UPDATE contracts SET notify_email = :e WHERE id = :id"),
                         {"e": f"{cid}-new@example.com", "id": cid})
        conn.execute(text("UPDATE clients SET email = 'ap@clients.example' WHERE id = 'cl'"))
    smtp_sink.faults.clear()
    nightly_alerts(as_of=AS_OF + timedelta(days=1), retry_backoff_minutes=0)
    nightly_alerts(as_of=AS_OF + timedelta(days=1), retry_backoff_minutes=0)  # nothing more

    received = smtp_sink.by_key()
    assert sorted(received) == sorted([key("moved"), key("refused"), dunning_key])
    assert [m["To"] for m in (received[key("moved")], received[key("refused")], received[dunning_key])] == [
        "moved-new@example.com", "refused-new@example.com", "ap@clients.example"]
    assert sorted(smtp_sink.keys()) == sorted(received)  # each once
    assert MODEL_PARAGRAPH in received[dunning_key].get_body(("plain",)).get_content()  # as stored
    ledger = db.read_frame(db.engine_for(url), "SELECT key, status, recipient, previous_recipient"
                           " FROM dueflow_ledger", {}).set_index("key")
    assert ledger.loc[key("moved"), ["status", "recipient", "previous_recipient"]].tolist() == [
        "sent", "moved-new@example.com", "moved@example.com"]
    assert ledger.loc[dunning_key, ["recipient", "previous_recipient"]].tolist() == [
        "ap@clients.example", "cl@clients.example"]
    assert ledger.loc[key("unchanged"), "status"] == "failed"  # refused, and the same address
    assert ledger.loc[key("doubt"), ["status", "recipient"]].tolist() == ["pending", "doubt@example.com"]
