"""The life of a bounce, end to end (docs/bounces.md): a night sends a reminder and the real
SMTP server accepts it; a bounce report for it arrives in the bounce mailbox; the intake
flow marks the row; the next night holds the second reminder and escalates, saying the
client could not be reached and why; after the address is fixed and the row resolved as
failed, the reminder goes out once more, once, to the new address."""

from __future__ import annotations

import mailbox
from datetime import date, timedelta

from sqlalchemy import text

from dueflow.flows.bounces import ingest_bounces
from dueflow.flows.nightly_alerts import nightly_alerts
from dueflow.tasks.adapters import db
from dueflow.tasks.core.report import markdown
from tests.helpers import bounce_reports as br
from tests.helpers.factories import client, insert, invoice

DAY0 = date(2027, 1, 4)
KEY = "dunning/inv-b/REMINDED_1"


def day(n: int) -> date:
    return DAY0 + timedelta(days=n)


def test_a_bounce_holds_the_reminders_escalates_and_is_sent_again_once(run_env, smtp_sink, monkeypatch,
                                                                       tmp_path, dueflow_cli):
    url = run_env
    root = tmp_path / "Maildir"
    mailbox.Maildir(root, create=True).close()
    env = {"DUEFLOW_DATABASE_URL": url, "DUEFLOW_MAIL_URL": f"smtp://127.0.0.1:{smtp_sink.port}",
           "DUEFLOW_MAIL_FROM": "alerts@dueflow.test", "DUEFLOW_ESCALATION_TO": "collections@corp.example",
           "DUEFLOW_BOUNCE_URL": f"maildir://{root}", "DUEFLOW_BOUNCE_ADDRESS": "bounces@dueflow.test",
           "DUEFLOW_REPLY_TO": "ar@dueflow.test"}
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    insert(url, "clients", [client("cb", email="old@clients.example")])
    insert(url, "invoices", [invoice("inv-b", "cb", day(0).isoformat() + "T10:00:00+00:00")])

    first = nightly_alerts(as_of=day(7))
    assert first.sent == 1 and smtp_sink.keys() == [KEY]
    sent = smtp_sink.by_key()[KEY]
    # The envelope sender is the bounce address; replies still go to Reply-To.
    assert smtp_sink.envelope_from == ["bounces@dueflow.test"] and sent["Reply-To"] == "ar@dueflow.test"

    # The client's server refuses it after accepting: Postfix's report arrives.
    report = br.postfix(br.Original(str(sent["Message-ID"]), str(sent["X-Dueflow-Key"]),
                                    recipient="old@clients.example", sender="bounces@dueflow.test"))
    box = mailbox.Maildir(root)
    box.add(report)
    box.close()
    intake = ingest_bounces()
    assert intake.marked == [KEY] and intake.hard == 1
    again = dueflow_cli("bounces", env=env)  # read once: the command finds nothing new
    assert again.returncode == 0 and "nothing new" in again.stdout and "1 bounced row(s)" in again.stdout
    ahead = dueflow_cli("forecast", "--from", day(8).isoformat(), "--days", "7", "--format", "csv", env=env)
    assert "OVERDUE" in ahead.stdout and "REMINDED_2" not in ahead.stdout
    engine = db.engine_for(url)
    assert db.ledger_status(engine, [KEY]) == {KEY: "bounced"}

    second = nightly_alerts(as_of=day(12))  # the day REMINDED_2 would be due
    keys = smtp_sink.keys()
    assert "dunning/inv-b/REMINDED_2" not in keys and keys[-1] == "dunning/inv-b/OVERDUE"
    escalation = smtp_sink.by_key()["dunning/inv-b/OVERDUE"]
    assert escalation["To"] == "collections@corp.example"
    assert "could not be reached" in str(escalation["Subject"])
    body = escalation.get_body(("plain",)).get_content()
    said = " ".join(body.split())
    assert "the client could not be reached: the reminder of 11 January 2027 to old@clients.example" \
           " bounced (5.1.1 550 5.1.1 <old@clients.example>: Recipient address rejected" in said
    assert "First reminder, 11 January 2027: bounced: the client could not be reached" in body
    # The run lists the bounced row under "Needs attention", with the command that settles it.
    assert second.bounced == 1 and second.ledger_bounced == 1
    text_md = markdown(second).replace("<br>", " ")  # a cell's lines
    assert "## Needs attention" in text_md and f"dueflow resolve {KEY} --as retry" in text_md

    listed = dueflow_cli("ledger", "--status", "bounced", env=env)
    assert listed.returncode == 0 and KEY in listed.stdout and "5.1.1" in listed.stdout
    history = dueflow_cli("invoices", "--id", "inv-b", env=env)
    assert "bounced" in history.stdout and "hard bounce" in history.stdout

    with engine.begin() as conn:  # the operator fixes the address in the company's data
        conn.execute(text("UPDATE clients SET email = 'new@clients.example' WHERE id = 'cb'"))
    resolved = dueflow_cli("resolve", KEY, "--as", "failed", "--note", "address fixed", env=env)
    assert resolved.returncode == 0 and "bounced → failed" in resolved.stdout

    third = nightly_alerts(as_of=day(13))
    assert third.sent == 1
    again = [m for m in smtp_sink.messages if str(m["X-Dueflow-Key"]) == KEY]
    assert [m["To"] for m in again] == ["old@clients.example", "new@clients.example"]
    assert again[1]["Message-ID"] == again[0]["Message-ID"]  # still derived from the key alone
    assert db.ledger_status(engine, [KEY]) == {KEY: "sent"}
    for n in (14, 20, 30):
        nightly_alerts(as_of=day(n))
    received = smtp_sink.keys()
    assert received.count(KEY) == 2 and "dunning/inv-b/REMINDED_2" not in received
    assert ingest_bounces().read == 0  # the old report never applies to the new delivery
    assert db.ledger_status(engine, [KEY]) == {KEY: "sent"}


def test_a_bad_bounce_url_is_one_line_without_its_password(dueflow_cli, cli_env):
    bad = cli_env | {"DUEFLOW_BOUNCE_URL": "pop3://bounces:Very-Secret-9@mail.example/INBOX"}
    result = dueflow_cli("bounces", env=bad)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert result.stderr.count("\n") == 1 and "DUEFLOW_BOUNCE_URL" in result.stderr
    assert "Very-Secret-9" not in result.stderr + result.stdout and "***" in result.stderr
    none = dueflow_cli("bounces", env=cli_env)
    assert none.returncode == 2 and "no bounce mailbox" in none.stderr


def test_a_bounce_forged_from_the_invoice_id_is_kept_aside_and_changes_nothing(run_env, smtp_sink,
                                                                               monkeypatch, tmp_path):
    """issue 36, case 3: the Message-ID was sha256(key), so anyone who knew an invoice id
    could build a DSN for a delivered reminder; it marked the row bounced, withheld the next
    reminder and escalated. Message-IDs are keyed with the database's secret now: the forged
    report names no email dueflow sent, and is kept aside with the reason."""
    from dueflow.tasks.core.addresses import Mailbox
    from dueflow.tasks.core.message import message_id_for

    url = run_env
    root = tmp_path / "Maildir"
    mailbox.Maildir(root, create=True).close()
    for name, value in {"DUEFLOW_BOUNCE_URL": f"maildir://{root}", "DUEFLOW_MAIL_FROM": "alerts@dueflow.test",
                        "DUEFLOW_ESCALATION_TO": "collections@corp.example"}.items():
        monkeypatch.setenv(name, value)
    insert(url, "clients", [client("cb", email="ap@clients.example")])
    insert(url, "invoices", [invoice("inv-b", "cb", day(0).isoformat() + "T10:00:00+00:00")])
    assert nightly_alerts(as_of=day(7)).sent == 1
    sent = smtp_sink.by_key()[KEY]

    derived = message_id_for(KEY, Mailbox("alerts@dueflow.test"))  # what a forger can compute
    assert str(sent["Message-ID"]) != derived
    box = mailbox.Maildir(root)
    box.add(br.postfix(br.Original(derived, KEY, recipient="ap@clients.example")))
    box.close()
    intake = ingest_bounces()
    assert intake.marked == [] and db.ledger_status(db.engine_for(url), [KEY]) == {KEY: "sent"}
    kept = db.read_frame(db.engine_for(url), "SELECT reason, detail FROM dueflow_bounce_kept", {})
    assert kept["reason"].tolist() == ["unmatched"] and derived in kept["detail"].iloc[0]

    nightly_alerts(as_of=day(12))  # the second reminder goes as due; nobody is told of a bounce
    delivered = smtp_sink.keys()
    assert "dunning/inv-b/REMINDED_2" in delivered and "dunning/inv-b/OVERDUE" not in delivered
