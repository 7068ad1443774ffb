"""The MTA tier (docs/bounces.md): reports a real mail server writes, read from a real IMAP
server. A private Postfix is the company's relay (DUEFLOW_MAIL_URL), a private Dovecot
serves the bounce mailbox over IMAPS with a throw-away CA (`?cafile=`), and one night's
reminders meet every fate at once (tests/helpers/mail_relay.py):

| client | what happens to the reminder |
|---|---|
| ok | delivered: no report |
| unknown | accepted, then the user is unknown (5.1.1) |
| refused | the remote MX refuses at RCPT (550 5.1.1) |
| full | the mailbox is full (5.2.2) |
| copy | delivered; its Cc's user is unknown: the copy's report |
| both | the client and its Cc unknown: one report, two recipients |
| dead | the MX never answers: delayed (4.4.1), then expired (`Action: failed`, 4.4.1) |

Then the intake reads what Postfix wrote, the queue lifetime ends, the intake reads the
expiry, and the next night escalates instead of writing to the dead address again.
One Postfix and one Dovecot for the module, one run of messages, waits on Postfix's log.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import date, timedelta
from email import message_from_bytes, policy
from email.message import EmailMessage
from pathlib import Path

import pytest

from dueflow.tasks.adapters import db
from tests.conftest import require_mta
from tests.helpers import imap_server, mail_relay
from tests.helpers.factories import client, insert, invoice
from tests.helpers.imap_server import Dovecot, self_signed_certificate
from tests.helpers.mail_relay import CLIENTS, COMPANY, DEAD, REFUSING, MailLog, Postfix

pytestmark = [pytest.mark.mta, pytest.mark.xdist_group("postfix")]

DAY0 = date(2027, 1, 4)
ESCALATION_TO = f"collections@{COMPANY}"
CASES = {  # client id: (email, cc_email)
    "ok": (f"ap@{CLIENTS}", None),
    "unknown": (f"nobody@{CLIENTS}", None),
    "refused": (f"ap@{REFUSING}", None),
    "full": (f"full@{CLIENTS}", None),
    "copy": (f"ap.copy@{CLIENTS}", f"gone.manager@{COMPANY}"),
    "both": (f"nobody.both@{CLIENTS}", f"gone.manager.both@{COMPANY}"),
    "dead": (f"ap@{DEAD}", None),
}
BOUNCED_AT_ONCE = ["unknown", "refused", "full", "both"]


def key(cid: str, step: str = "REMINDED_1") -> str:
    return f"dunning/inv-{cid}/{step}"


def day(n: int) -> date:
    return DAY0 + timedelta(days=n)


@dataclass
class Story:
    """What each step of the story left, for the tests to read."""

    postfix: Postfix
    dovecot: Dovecot
    url: str
    first_night: object
    log_after_first: MailLog
    intake: object
    ledger_after_intake: dict[str, tuple[str, str | None]]
    flags_after_intake: list[tuple[bytes, ...]]
    expiry: object
    again: object
    ledger_after_expiry: dict[str, tuple[str, str | None]]
    second_night: object
    log_after_second: MailLog
    escalations: list[EmailMessage]
    started: float = 0.0  # when its servers were started (monotonic)


def ledger(url: str) -> dict[str, tuple[str, str | None]]:
    frame = db.read_frame(db.engine_for(url), "SELECT key, status, error FROM dueflow_ledger", {})
    return {k: (s, e if isinstance(e, str) else None) for k, s, e in frame.itertuples(index=False)}


def message_ids(url: str, keys: list[str]) -> dict[str, str]:
    frame = db.read_frame(db.engine_for(url), "SELECT key, message_id FROM dueflow_ledger", {})
    found = dict(frame.itertuples(index=False))
    return {k: str(found[k]) for k in keys}


def mailbox(folder: Path) -> list[EmailMessage]:
    new = folder / "new"
    return [message_from_bytes(p.read_bytes(), policy=policy.default)  # type: ignore[misc]
            for p in sorted(new.iterdir())] if new.exists() else []


@pytest.fixture(scope="module")
def story(tmp_path_factory, prefect_server) -> Iterator[Story]:
    require_mta(mail_relay.missing_reason() or imap_server.missing_reason())
    started = time.monotonic()
    work = tmp_path_factory.mktemp("mta")
    dovecot = Dovecot(self_signed_certificate(work / "ca.pem"))
    dovecot.start()
    postfix = Postfix(dovecot.root / "mail" / imap_server.USER,
                      mailboxes=(f"ap@{CLIENTS}", f"ap.copy@{CLIENTS}", ESCALATION_TO))
    url = f"sqlite:///{work / 'dueflow.db'}"
    try:
        postfix.start()
        db.init_db(db.engine_for(url), sample_tables=True)
        insert(url, "clients", [client(cid, email=to, cc_email=cc) for cid, (to, cc) in CASES.items()])
        insert(url, "invoices", [invoice(f"inv-{cid}", cid, day(0).isoformat() + "T10:00:00+00:00")
                                 for cid in CASES])
        env = {"DUEFLOW_DATABASE_URL": url, "DUEFLOW_MAIL_URL": postfix.url,
               "DUEFLOW_MAIL_FROM": f"alerts@{COMPANY}", "DUEFLOW_BOUNCE_ADDRESS": f"bounces@{COMPANY}",
               "DUEFLOW_BOUNCE_URL": dovecot.url, "DUEFLOW_ESCALATION_TO": ESCALATION_TO}
        with pytest.MonkeyPatch.context() as patch:
            for name, value in env.items():
                patch.setenv(name, value)
            told = tell(postfix, dovecot, url)
            told.started = started
            yield told
    finally:
        try:
            postfix.stop()
        finally:
            dovecot.stop()
            db.engine_for(url).dispose()


def tell(postfix: Postfix, dovecot: Dovecot, url: str) -> Story:
    from dueflow.flows.bounces import ingest_bounces
    from dueflow.flows.nightly_alerts import nightly_alerts

    first = nightly_alerts(as_of=day(7))
    ids = message_ids(url, [key(cid) for cid in CASES])
    log = postfix.settle(list(ids.values()))  # each delivered, bounced, or deferred and reported delayed
    intake = ingest_bounces()
    after_intake, flags = ledger(url), dovecot.flags()
    postfix.expire(ids[key("dead")])
    expiry = ingest_bounces()
    again = ingest_bounces()
    after_expiry = ledger(url)
    second = nightly_alerts(as_of=day(12))  # the day the second reminders are due
    sent_now = [k for k in ledger(url) if k not in after_expiry]
    log_second = postfix.settle(list(message_ids(url, sent_now).values()))
    escalations = mailbox(postfix.maildir(ESCALATION_TO))
    return Story(postfix, dovecot, url, first, log, intake, after_intake, flags, expiry, again, after_expiry,
                 second, log_second, escalations)


@pytest.fixture(autouse=True)
def tier_time(story, record_property) -> Iterator[None]:
    """The tier's run time so far, after each test (tests/conftest.py prints it)."""
    yield
    record_property("mta_tier_seconds", time.monotonic() - story.started)


def test_postfix_delivers_refuses_and_defers_each_reminder_as_it_should(story):
    assert story.first_night.sent == len(CASES)
    ids = message_ids(story.url, [key(cid) for cid in CASES])
    fate = {cid: story.log_after_first.by_message_id(ids[key(cid)]).status for cid in CASES}
    assert fate["ok"] == {f"ap@{CLIENTS}": "sent"}
    assert fate["copy"] == {f"ap.copy@{CLIENTS}": "sent", f"gone.manager@{COMPANY}": "bounced"}
    assert fate["both"] == {f"nobody.both@{CLIENTS}": "bounced", f"gone.manager.both@{COMPANY}": "bounced"}
    assert all(set(fate[cid].values()) == {"bounced"} for cid in ("unknown", "refused", "full"))
    assert fate["dead"] == {f"ap@{DEAD}": "deferred"}
    delivered = mailbox(story.postfix.maildir(f"ap@{CLIENTS}"))  # really delivered, both nights
    assert sorted(str(m["X-Dueflow-Key"]) for m in delivered) == [key("ok"), key("ok", "REMINDED_2")]


def test_the_intake_marks_the_hard_bounces_at_once_and_keeps_the_copies_aside(story):
    intake = story.intake
    assert intake.read == 6  # four failures, the copy's report, the delay notice; none for "ok"
    assert sorted(intake.marked) == sorted(key(cid) for cid in BOUNCED_AT_ONCE)
    assert (intake.hard, intake.soft) == (4, 1)
    assert intake.kept["reason"].tolist() == ["copy", "copy"]  # the Cc's report, the Cc of "both"
    rows = story.ledger_after_intake
    assert {k for k, (s, _) in rows.items() if s == "bounced"} == {key(cid) for cid in BOUNCED_AT_ONCE}
    assert rows[key("unknown")][1] == f'bounced: 5.1.1 unknown user: "nobody@{CLIENTS}"'
    assert rows[key("refused")][1].startswith(
        f"bounced: 5.1.1 550 5.1.1 <ap@{REFUSING}>: Recipient address rejected: User unknown")
    assert rows[key("full")][1].startswith("bounced: 5.2.2 ")
    assert rows[key("dead")] == ("sent", None)  # delayed: recorded, changes nothing
    assert rows[key("ok")] == rows[key("copy")] == ("sent", None)
    assert len(story.flags_after_intake) == 6
    assert all(b"DueflowProcessed" in f and b"\\Seen" not in f for f in story.flags_after_intake)


def test_when_postfix_gives_up_on_a_dead_mx_the_row_bounces(story):
    """The report of the issue: `Action: failed`, `Status: 4.4.1`, the connection refused."""
    assert story.log_after_second.by_message_id(
        message_ids(story.url, [key("dead")])[key("dead")]).expired
    assert (story.expiry.read, story.expiry.marked, story.expiry.hard, story.expiry.soft) == (
        1, [key("dead")], 1, 0)
    status, error = story.ledger_after_expiry[key("dead")]
    assert status == "bounced"
    assert error == (f"bounced: 4.4.1 connect to 127.0.0.1[127.0.0.1]:{story.postfix.dead_port}:"
                     " Connection refused")
    assert (story.again.read, story.again.marked) == (0, [])  # read once


def test_the_next_night_escalates_instead_of_writing_to_the_dead_address(story):
    rows = ledger(story.url)
    assert key("dead", "REMINDED_2") not in rows and key("dead", "OVERDUE") in rows
    assert {k for k in rows if k.endswith("/REMINDED_2")} == {key(c, "REMINDED_2") for c in ("ok", "copy")}
    to_dead = [m for m in story.log_after_second.messages.values() if f"ap@{DEAD}" in m.status]
    assert len(to_dead) == 1  # the first reminder only; nothing more to the dead address
    (escalation,) = [m for m in story.escalations if str(m["X-Dueflow-Key"]) == key("dead", "OVERDUE")]
    assert "could not be reached" in str(escalation["Subject"])
    said = " ".join(escalation.get_body(("plain",)).get_content().split())  # type: ignore[union-attr]
    assert f"to ap@{DEAD} bounced (4.4.1 connect to 127.0.0.1[127.0.0.1]:{story.postfix.dead_port}:" \
           " Connection refused)" in said
    assert len(story.escalations) == len(BOUNCED_AT_ONCE) + 1  # one per bounced invoice, once
    second = story.second_night
    assert second.ledger_bounced == len(BOUNCED_AT_ONCE) + 1
    from dueflow.tasks.core.report import markdown

    needs = markdown(second).replace("<br>", " ").split("## Needs attention")[1]
    assert f"dueflow resolve {key('dead')} --as retry" in needs and "4.4.1" in needs
