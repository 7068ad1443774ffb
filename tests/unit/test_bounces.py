"""Bounces in the pure core (docs/bounces.md): what each server's report says, which row it
is about (never a forged or unknown one), the hold rule after a bounce, and the
escalation's words; and the bounce URL's settings, its password masked."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dueflow.blocks.errors import ConfigError
from dueflow.blocks.settings import Settings
from dueflow.tasks.core.addresses import Mailbox
from dueflow.tasks.core.bounces import (
    MAX_REPORT_BYTES,
    BounceKind,
    KeptReason,
    match_reports,
    parse_report,
    reports_frame,
)
from dueflow.tasks.core.dunning_rule import due_dunning_steps
from dueflow.tasks.core.message import message_id_for
from dueflow.tasks.core.render import compose_dunning_emails
from tests import examples
from tests.helpers import bounce_reports as br
from tests.unit.test_dunning_rule import CLIENTS, invoices_frame

SENDER = Mailbox("alerts@dueflow.test")
KEY = "dunning/inv-0/REMINDED_1"
ORIGINAL = br.Original(message_id_for(KEY, SENDER), KEY)


@pytest.mark.parametrize(("name", "code", "words"), [
    ("postfix", "5.1.1", "Recipient address rejected: User unknown"),
    ("exim", "5.1.1", "mailbox unavailable"),
    ("exchange", "5.1.10", "RESOLVER.ADR.RecipientNotFound"),
    ("gmail", "5.1.1", "The email account that you tried to reach does not exist"),
])
def test_each_servers_hard_bounce_names_the_original_and_the_reason(name, code, words):
    (report,) = parse_report(br.FORMATS[name](ORIGINAL), name)
    assert report.problem is None and report.kind == BounceKind.HARD
    assert (report.status_code, report.message_id, report.key) == (code, ORIGINAL.message_id, KEY)
    assert words in report.diagnostic and "\n" not in report.diagnostic
    assert report.recipient == ORIGINAL.recipient
    assert report.seen_at == br.DEFAULT_DATE


def test_a_delayed_report_is_soft():
    (report,) = parse_report(br.postfix(ORIGINAL, delayed=True), "soft")
    assert (report.kind, report.status_code) == (BounceKind.SOFT, "4.4.1")


def test_malformed_mime_and_a_human_reply_are_not_reports():
    assert "malformed MIME" in parse_report(br.malformed(ORIGINAL), "m")[0].problem
    assert "not a bounce" in parse_report(br.not_a_bounce(), "h")[0].problem


def test_an_enormous_report_is_read_from_its_first_megabyte():
    raw = br.enormous(ORIGINAL, megabytes=8)
    (report,) = parse_report(raw, "big")
    assert len(raw) > 8 * MAX_REPORT_BYTES and report.kind == BounceKind.HARD and report.key == KEY
    assert report.report_id != parse_report(raw + b"\r\n", "longer")[0].report_id  # the size counts
    assert report.report_id == parse_report(raw, "again")[0].report_id  # the same report, the same id


def ledger(*keys: str, status: str = "sent") -> pd.DataFrame:
    return pd.DataFrame({"key": list(keys), "message_id": [message_id_for(k, SENDER) for k in keys],
                         "status": status, "sending_at": "2027-01-07 06:00:00+00:00"})


def test_reports_match_by_message_id_and_key_and_the_rest_is_kept_with_a_reason():
    other = "dunning/inv-1/REMINDED_1"
    reports = reports_frame([
        *parse_report(br.postfix(ORIGINAL), "good"),
        *parse_report(br.postfix(br.Original(message_id_for(KEY, SENDER), other)), "forged"),
        *parse_report(br.postfix(br.Original("<never@dueflow.test>", "dunning/x/REMINDED_1")), "never"),
        *parse_report(br.malformed(ORIGINAL), "malformed"),
        *parse_report(br.gmail(br.Original(message_id_for(other, SENDER), other)), "not handed"),
    ])
    rows = pd.concat([ledger(KEY), ledger(other, status="failed")], ignore_index=True)
    matched = match_reports(reports, rows)
    assert matched.bounces["source"].tolist() == ["good"] and matched.bounces["key"].tolist() == [KEY]
    kept = dict(zip(matched.kept["source"], matched.kept["reason"], strict=True))
    assert kept == {"forged": KeptReason.MISMATCHED, "never": KeptReason.UNMATCHED,
                    "malformed": KeptReason.UNREADABLE, "not handed": KeptReason.NOT_SENT}
    forged = matched.kept.set_index("source").loc["forged", "detail"]
    assert forged == f"Message-ID of {KEY} but X-Dueflow-Key {other}"


def test_a_report_quoting_no_key_is_not_taken_on_its_message_id_alone():
    raw = br.postfix(ORIGINAL).replace(f"X-Dueflow-Key: {KEY}\r\n".encode(), b"")
    matched = match_reports(reports_frame(parse_report(raw, "r")), ledger(KEY))
    assert matched.bounces.empty and matched.kept["reason"].tolist() == [KeptReason.MISMATCHED]


@settings(max_examples=examples(40), deadline=None)
@given(st.permutations(range(5)))
def test_matching_does_not_depend_on_the_order_of_the_reports(order):
    made = [br.postfix(ORIGINAL), br.exim(ORIGINAL), br.postfix(ORIGINAL, delayed=True),
            br.not_a_bounce(), br.gmail(br.Original("<x@y>", KEY))]
    reports = reports_frame([r for i in order for r in parse_report(made[i], str(i))])
    matched = match_reports(reports, ledger(KEY))
    assert sorted(matched.bounces["source"]) == ["0", "1", "2"]
    assert sorted(matched.kept["source"]) == ["3", "4"]


def history(step_status: str, as_of: str = "2027-01-08") -> pd.DataFrame:
    return pd.DataFrame({"subject_id": ["inv-0"], "step": ["REMINDED_1"], "step_rank": [1],
                         "as_of": [as_of], "attempt_as_of": [as_of], "status": [step_status],
                         "bounce": ["bounced: 5.1.1 550 5.1.1 User unknown" if step_status == "bounced"
                                    else None]})


def test_a_bounced_reminder_holds_the_next_and_the_escalation_comes_in_its_place():
    invoices = invoices_frame([date(2027, 1, 1)])
    on = date(2027, 1, 13)  # REMINDED_2 would be due (5 days after the reminder)
    sent = due_dunning_steps(invoices, CLIENTS, history("sent"), on, escalation_to="boss@corp.example")
    assert sent.due["step"].tolist() == ["REMINDED_2"]
    bounced = due_dunning_steps(invoices, CLIENTS, history("bounced"), on, escalation_to="boss@corp.example")
    assert bounced.due["step"].tolist() == ["OVERDUE"]
    assert bounced.due["recipient"].tolist() == ["boss@corp.example"]
    early = due_dunning_steps(invoices, CLIENTS, history("bounced"), on - timedelta(days=1),
                              escalation_to="boss@corp.example")
    assert early.due.empty  # not before the next step would have been due
    failed = due_dunning_steps(invoices, CLIENTS, history("failed"), on, escalation_to="boss@corp.example")
    assert failed.due.empty  # a failed step still holds everything


def test_the_escalation_says_the_client_could_not_be_reached_and_why():
    invoices = invoices_frame([date(2027, 1, 1)])
    on = date(2027, 1, 13)
    decision = due_dunning_steps(invoices, CLIENTS, history("bounced"), on, escalation_to="boss@corp.example")
    composed = compose_dunning_emails(decision.due, history("bounced"), SENDER, as_of=on)
    (email,) = composed.emails
    assert "could not be reached" in email.subject
    text = " ".join(email.body_text.split())
    assert "the client could not be reached: the reminder of 8 January 2027 to ap@acme.example bounced" \
           " (5.1.1 550 5.1.1 User unknown)" in text
    assert "First reminder, 8 January 2027: bounced: the client could not be reached (5.1.1 550" in text
    assert "could not be reached" in email.body_html
    plain = compose_dunning_emails(
        due_dunning_steps(invoices, CLIENTS, pd.concat([history("sent"), history("sent").assign(
            step="REMINDED_2", step_rank=2)]), date(2027, 1, 20), escalation_to="boss@corp.example").due,
        history("sent"), SENDER, as_of=date(2027, 1, 20))
    assert "could not be reached" not in plain.emails[0].body_text  # only after a bounce


def test_the_bounce_url_is_checked_and_its_password_never_shown():
    env = {"DUEFLOW_BOUNCE_URL": "imaps://bounces:hunter2-secret@mail.example/INBOX?bogus=1"}
    with pytest.raises(ConfigError) as refused:
        Settings.from_env(env)
    assert "hunter2-secret" not in str(refused.value) and "***" in str(refused.value)
    good = Settings.from_env({"DUEFLOW_BOUNCE_URL": "imaps://bounces:hunter2-secret@mail.example/Bounces",
                              "DUEFLOW_BOUNCE_ADDRESS": "bounces@corp.example"})
    config = good.bounce_mailbox()
    assert (config.host, config.port, config.folder, config.processed) == (
        "mail.example", 993, "Bounces", "flag")
    assert "hunter2-secret" not in repr(good) + repr(config) + config.describe()
    assert good.sender().envelope_address == "bounces@corp.example"
    assert Settings.from_env({}).sender().envelope_address == "dueflow@localhost"  # From by default
    with pytest.raises(ConfigError, match="DUEFLOW_BOUNCE_ADDRESS"):
        Settings.from_env({"DUEFLOW_BOUNCE_ADDRESS": "not an address"})
    assert Settings.from_env({"DUEFLOW_BOUNCE_URL": "maildir:///var/mail/bounces"}).bounce_mailbox().path \
        .as_posix() == "/var/mail/bounces"


def test_a_report_is_dated_by_itself_not_by_when_it_is_read():
    later = br.DEFAULT_DATE + timedelta(days=3)
    assert parse_report(br.exim(ORIGINAL, when=later), "x")[0].seen_at == later.astimezone(UTC)
    assert parse_report(br.exim(ORIGINAL), "x")[0].seen_at == datetime(2027, 1, 8, 6, 30, tzinfo=UTC)


def test_every_run_lists_bounced_rows_under_needs_attention_and_the_event_counts_them():
    from dueflow.tasks.core.report import attention_payload, bounced_rows, markdown, needs_person, summarize

    ledger_rows = pd.DataFrame({"key": [KEY], "job": ["dunning"], "recipient": ["old@clients.example"],
                                "error": ["bounced: 5.1.1 550 5.1.1 User unknown"]})
    summary = summarize(date(2027, 1, 13), False, None, bounced_rows(ledger_rows), {"bounced": 1})
    assert (summary.bounced, summary.ledger_bounced) == (1, 1) and needs_person(summary)
    assert attention_payload(summary)["bounced"] == 1
    text = markdown(summary).replace("<br>", " ")  # a cell's lines
    needs = text.split("## Needs attention")[1]
    assert "| bounced |" in needs and "bounced: 5.1.1 550 5.1.1 User unknown" in needs
    assert f"fix the address, then dueflow resolve {KEY} --as retry" in needs
    quiet = summarize(date(2027, 1, 13), False, None, bounced_rows(ledger_rows.iloc[0:0]), {})
    assert quiet.bounced == 0 and not needs_person(quiet) and attention_payload(quiet)["bounced"] == 0


def test_an_expired_message_is_hard_whatever_the_class_of_its_last_status():
    """RFC 3464 §2.3.3: Action says what the MTA did. Exchange returns a message it could not
    deliver before it expired as `Action: failed`, `Status: 4.4.7`: it gave up. (Postfix's
    own expiry report: tests/unit/test_postfix_reports.py.)"""
    (report,) = parse_report(br.exchange(ORIGINAL, expired=True), "expired")
    assert (report.action, report.kind, report.status_code) == ("failed", BounceKind.HARD, "4.4.7")
    assert report.diagnostic == "550 4.4.7 QUEUE.Expired; message expired"
    (delayed,) = parse_report(br.postfix(ORIGINAL, delayed=True), "delayed")
    assert (delayed.action, delayed.kind) == ("delayed", BounceKind.SOFT)
