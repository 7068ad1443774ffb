"""Rendering: both locales, escaping, header safety, deterministic ids."""

from __future__ import annotations

from datetime import date
from email import message_from_bytes, policy

import pandas as pd
import pytest

from dueflow.tasks.core.addresses import Mailbox, parse_mailbox
from dueflow.tasks.core.message import message_bytes, message_id_for
from dueflow.tasks.core.money import format_money
from dueflow.tasks.core.render import compose_renewal_alerts
from tests.unit.test_hostile_rows import on_the_wire

SENDER = parse_mailbox("alerts@example.com", "DUEFLOW_MAIL_FROM")


def due_row(**overrides) -> pd.DataFrame:
    row = {"key": "renewal/c-42/2027-03-01/30d", "subject_id": "c-42", "recipient": "cfo@example.com",
           "vendor": "Acme", "title": "Hosting", "amount": "12500.5", "currency": "EUR",
           "renewal_date": date(2027, 3, 1), "days_left": 30, "step_rank": 30}
    return pd.DataFrame([row | overrides])


@pytest.mark.parametrize(
    ("locale", "amount", "day", "phrase"),
    [("en", "€12,500.50", "1 March 2027", "renews in 30 days"),
     ("es", "12.500,50\xa0€", "1 de marzo de 2027", "se renueva dentro de 30 días")],
)
def test_both_locales_carry_the_facts(locale, amount, day, phrase):
    [email] = compose_renewal_alerts(due_row(), locale, SENDER).emails
    for body in (email.body_text, email.body_html):
        assert "Acme" in body and "Hosting" in body and amount in body and day in body
        assert phrase in body
    assert "Acme" in email.subject and day in email.subject


def test_html_is_escaped_and_headers_cannot_be_injected():
    [email] = compose_renewal_alerts(
        due_row(vendor="<script>x</script>", title="Bad\r\nBcc: victim@example.com"),
        "en", SENDER,
    ).emails
    assert "<script>" not in email.body_html and "&lt;script&gt;" in email.body_html
    assert "\r" not in email.subject and "\n" not in email.subject
    message = message_from_bytes(message_bytes(email, SENDER), policy=policy.default)
    assert message["Bcc"] is None
    assert message["Subject"] == email.subject  # one line, the injected header is just text
    assert message.get_body(("html",)).get_content() == on_the_wire(email.body_html)
    assert message.get_body(("plain",)).get_content() == on_the_wire(email.body_text)
    assert message["X-Dueflow-Key"] == "renewal/c-42/2027-03-01/30d"
    assert message["Message-ID"] == email.message_id


def test_non_ascii_headers_and_bodies_survive_the_wire_format():
    sender = parse_mailbox("Facturación <alerts@example.com>", "DUEFLOW_MAIL_FROM")
    [email] = compose_renewal_alerts(due_row(vendor="Ñandú Logística", title="Limpieza"), "es",
                                     sender).emails
    message = message_from_bytes(message_bytes(email, sender), policy=policy.default)
    assert message["Subject"] == email.subject and "Ñandú" in message["Subject"]
    assert message["From"].addresses[0].display_name == "Facturación"
    assert "Ñandú Logística" in message.get_body(("plain",)).get_content()
    assert all(len(line) <= 998 for line in message_bytes(email, SENDER).split(b"\r\n"))


def test_message_id_is_deterministic_per_key():
    sender = parse_mailbox("Dueflow <alerts@example.com>", "DUEFLOW_MAIL_FROM")
    a = message_id_for("renewal/c-1/2027-03-01/30d", sender)
    assert a == message_id_for("renewal/c-1/2027-03-01/30d", sender)
    assert a != message_id_for("renewal/c-1/2027-03-01/15d", sender)
    assert a.endswith("@example.com>") and a.startswith("<")


@pytest.mark.parametrize(("amount", "currency", "locale", "shown"), [
    ("1234567.89", "USD", "en", "$1,234,567.89"),
    ("0.5", "EUR", "es", "0,50\xa0€"),
    ("980.40", "EUR", "es", "980,40\xa0€"),
    ("1450", "JPY", "en", "¥1,450"),
    ("12.345", "KWD", "en", "KWD12.345"),
    ("123456789012345678.99", "EUR", "en", "€123,456,789,012,345,678.99"),
])
def test_money_is_exact_with_the_currency_minor_units(amount, currency, locale, shown):
    assert format_money(amount, currency, locale) == shown


def test_a_keyed_message_id_cannot_be_made_from_the_key_alone():
    """issue 36, case 3: the same key and secret give the same id (a retry, another worker);
    another secret, or none, another."""
    sender, key = Mailbox("alerts@corp.example"), "dunning/42/REMINDED_1"
    keyed = message_id_for(key, sender, "s3cret")
    assert keyed == message_id_for(key, sender, "s3cret") and keyed.endswith("@corp.example>")
    assert keyed not in (message_id_for(key, sender), message_id_for(key, sender, "other"))
    assert "s3cret" not in keyed


def test_payment_instructions_are_said_in_the_reminders_language():
    from dueflow.tasks.core.render import payment_text

    text = "Bank transfer, IBAN X\nQuote the invoice number.\n[es]\nTransferencia, IBAN X\n[de]\nÜberweisung"
    assert payment_text(text, "en") == "Bank transfer, IBAN X\nQuote the invoice number."
    assert payment_text(text, "es") == "Transferencia, IBAN X"
    assert payment_text(text, "de") == "Überweisung"
    assert payment_text("Bank transfer, IBAN X", "es") == "Bank transfer, IBAN X"  # one text for all
    assert payment_text("[es]\nTransferencia", "en") == "Transferencia"  # only one section: it is the text
