"""Arbitrary text in every column (G6), decided and rendered without a database: every
row ends due or quarantined exactly as the row-by-row reference says, and every email
made from the due rows is well-formed on the wire, whatever the data held."""

from __future__ import annotations

from collections import Counter
from email import message_from_bytes, policy

import pandas as pd
from hypothesis import HealthCheck, given, settings

from dueflow.tasks.core.addresses import Mailbox
from dueflow.tasks.core.dunning_rule import due_dunning_steps
from dueflow.tasks.core.keys import id_problems, parse_key, printable_id
from dueflow.tasks.core.message import HEADER_NAMES, OutgoingEmail, message_bytes
from dueflow.tasks.core.render import compose_dunning_emails, compose_renewal_alerts
from dueflow.tasks.core.renewal_rule import due_renewal_alerts
from dueflow.tasks.core.validate import business_dates
from tests import examples
from tests.helpers import hostile

SENDER = Mailbox("alerts@corp.example", "Équipe Finanzas, S.A.")
CONTRACT_COLUMNS = ["id", "vendor", "title", "amount", "currency", "renewal_date", "notify_email",
                    "status"]
CLIENT_COLUMNS = ["id", "name", "email", "locale", "notes", "dunning_paused", "cc_email",
                  "dunning_paused_until", "dunning_profile"]
INVOICE_COLUMNS = ["id", "client_id", "number", "amount", "currency", "status", "sent_at",
                   "due_date", "paid_at", "dunning_hold_until"]
EMPTY_RENEWALS = pd.DataFrame(columns=["subject_id", "cycle", "handled_rank"])
EMPTY_DUNNING = pd.DataFrame(columns=["subject_id", "step", "step_rank", "as_of", "attempt_as_of",
                                      "status"])
QUICK = settings(max_examples=examples(20), deadline=None, suppress_health_check=[HealthCheck.too_slow])


def on_the_wire(body: str) -> str:
    """A body as a reader's parser gives it back: quoted-printable carries line breaks as
    CRLF (MIME's canonical text form); a body with a carriage return of its own goes as
    base64 and comes back exactly."""
    return body if "\r" in body else body.replace("\n", "\r\n")


def assert_well_formed(email: OutgoingEmail) -> None:
    """The email on the wire: parses strictly without defects, has exactly dueflow's
    headers, no line over 998 octets, and decodes back to what the ledger holds."""
    raw = message_bytes(email, SENDER)
    assert all(len(line) <= 998 for line in raw.split(b"\r\n"))
    assert b"\n" not in raw.replace(b"\r\n", b"") and b"\r" not in raw.replace(b"\r\n", b"")
    message = message_from_bytes(raw, policy=policy.strict)
    assert not message.defects
    expected = list(HEADER_NAMES)
    if email.cc_recipient:  # the account manager's copy, after To
        expected.insert(expected.index("To") + 1, "Cc")
        assert [a.addr_spec for a in message["Cc"].addresses] == [email.cc_recipient]
    assert list(message.keys()) == expected
    assert str(message["Subject"]) == email.subject
    assert str(message["X-Dueflow-Key"]) == email.key
    assert [a.addr_spec for a in message["To"].addresses] == [email.recipient]
    assert message["From"].addresses[0].addr_spec == SENDER.address
    assert message.get_body(("plain",)).get_content() == on_the_wire(email.body_text)
    assert message.get_body(("html",)).get_content() == on_the_wire(email.body_html)
    assert not any(c in email.subject for c in "\r\n\x00")


@QUICK
@given(rows=hostile.contracts())
def test_renewals_from_hostile_rows_match_the_reference_and_make_clean_emails(rows):
    frame = pd.DataFrame(rows, columns=CONTRACT_COLUMNS, dtype=object)
    decision = due_renewal_alerts(frame, EMPTY_RENEWALS, hostile.AS_OF, hostile.LEADS)
    expected = hostile.expected_renewals(rows, [hostile.as_date(r["renewal_date"]) for r in rows])

    assert sorted(decision.due["subject_id"]) == sorted(
        r["id"] for r, e in zip(rows, expected, strict=True) if e == "due")
    assert Counter(decision.quarantined["source_id"]) == Counter(
        printable_id(r["id"]) for r, e in zip(rows, expected, strict=True) if e == "quarantined")
    assert decision.quarantined["reason"].str.len().gt(0).all()
    for row in decision.due.itertuples(index=False):
        parsed = parse_key(row.key)
        assert (parsed.subject_id, parsed.cycle, parsed.step_rank) == (row.subject_id, row.cycle,
                                                                         row.step_rank)
    assert id_problems(decision.due["subject_id"]).isna().all()
    for locale in ("en", "es"):
        composed = compose_renewal_alerts(decision.due, locale, SENDER)
        emails, failures = composed.emails, composed.failures
        assert not failures and len(emails) == len(decision.due)
        for email in emails:
            assert_well_formed(email)


@QUICK
@given(invoice_rows=hostile.invoices(), client_rows=hostile.clients())
def test_reminders_from_hostile_rows_match_the_reference_and_make_clean_emails(invoice_rows,
                                                                               client_rows):
    invoices = pd.DataFrame(invoice_rows, columns=INVOICE_COLUMNS, dtype=object)
    clients = pd.DataFrame(client_rows, columns=CLIENT_COLUMNS, dtype=object)
    decision = due_dunning_steps(invoices, clients, EMPTY_DUNNING, hostile.AS_OF)
    sent_dates = business_dates(invoices["sent_at"], "UTC").dt.date
    expected = hostile.expected_reminders(invoice_rows, client_rows,
                                          [None if pd.isna(d) else d for d in sent_dates])

    assert sorted(decision.due["subject_id"]) == sorted(
        r["id"] for r, e in zip(invoice_rows, expected, strict=True) if e == "due")
    assert Counter(decision.quarantined["source_id"]) == Counter(
        printable_id(r["id"]) for r, e in zip(invoice_rows, expected, strict=True)
        if e == "quarantined")
    assert set(decision.due["step"]) <= {"REMINDED_1"}
    composed = compose_dunning_emails(decision.due, EMPTY_DUNNING, SENDER)
    emails, failures = composed.emails, composed.failures
    assert not failures and len(emails) == len(decision.due)
    for email in emails:
        assert_well_formed(email)
