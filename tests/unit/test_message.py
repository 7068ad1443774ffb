"""The pure pieces that carry G6 on the wire: keys, headers, addresses, money."""

from __future__ import annotations

import re
from datetime import date
from email import message_from_bytes, policy

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dueflow.tasks.core.addresses import Mailbox, parse_mailbox
from dueflow.tasks.core.keys import (
    DunningStep,
    dunning_key,
    id_problems,
    parse_key,
    parse_keys,
    printable_id,
    renewal_key,
)
from dueflow.tasks.core.message import HEADER_NAMES, OutgoingEmail, message_bytes, message_id_for
from dueflow.tasks.core.money import amount_problems, format_money
from tests import examples

CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")
one_line_text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=300).map(
    lambda s: CONTROL.sub(" ", s))
header_words = st.one_of(one_line_text, st.sampled_from(
    ["=?utf-8?b?U3Bvb2Y=?=", "=?iso-8859-1?q?caf=E9?=", "a  b", " lead", "trail ", "x" * 1000,
     "ñ" * 500, "a" * 997 + " b", "Bcc: victim@example.com"]))


@settings(max_examples=examples(150), deadline=None)
@given(subject=header_words, key=header_words.filter(bool),
       name=st.text(st.characters(blacklist_categories=("Cs", "Cc")), max_size=80))
def test_every_header_value_round_trips_on_one_logical_line(subject, key, name):
    try:
        sender = parse_mailbox(f"{name} <alerts@corp.example>", "DUEFLOW_MAIL_FROM")
    except ValueError:
        sender = Mailbox("alerts@corp.example")
    email = OutgoingEmail(key, "to@x.example", subject, "body\n", "<p>body</p>", message_id_for(key, sender))
    raw = message_bytes(email, sender)
    assert all(len(line) <= 998 for line in raw.split(b"\r\n"))
    assert b"\n" not in raw.replace(b"\r\n", b"")  # no bare LF, no bare CR
    message = message_from_bytes(raw, policy=policy.strict)
    assert not message.defects and list(message.keys()) == list(HEADER_NAMES)
    assert str(message["Subject"]) == subject  # '=?…?=' in data is text, not an encoded word
    assert str(message["X-Dueflow-Key"]) == key
    assert message["From"].addresses[0].addr_spec == "alerts@corp.example"
    # Python's parser puts a space between adjacent encoded words of a display name (mail
    # clients do not, as RFC 2047 says): compare the name without whitespace.
    shown = message["From"].addresses[0].display_name
    assert "".join(shown.split()) == "".join(sender.display_name.split())


@pytest.mark.parametrize("bad", ["a\r\nBcc: x@y.example", "nul\x00", "line\u2028sep", "\x1b[0m"])
def test_a_header_value_with_control_characters_is_refused_not_sent(bad):
    email = OutgoingEmail("renewal/c/2027-03-01/30d", "to@x.example", bad, "b", "<p>b</p>", "<a@b.example>")
    with pytest.raises(ValueError, match="control characters"):
        message_bytes(email, Mailbox("alerts@corp.example"))


@pytest.mark.parametrize("recipient", ["two@@x.example", "a@b.example, c@d.example", "a@b.example\r\n",
                                       "Ñ@x.example", "<a@b.example>"])
def test_a_recipient_that_is_not_one_plain_address_is_refused(recipient):
    email = OutgoingEmail("k", recipient, "s", "b", "<p>b</p>", "<a@b.example>")
    with pytest.raises(ValueError, match="recipient"):
        message_bytes(email, Mailbox("alerts@corp.example"))


@pytest.mark.parametrize(("value", "address", "name"), [
    ("alerts@corp.example", "alerts@corp.example", ""),
    ("dueflow@localhost", "dueflow@localhost", ""),
    ("Finance <alerts@corp.example>", "alerts@corp.example", "Finance"),
    ("Finance, Inc <alerts@corp.example>", "alerts@corp.example", "Finance, Inc"),
    ('"Finance, Inc" <alerts@corp.example>', "alerts@corp.example", "Finance, Inc"),
    ("Équipe Finanzas, S.A. <alertas@corp.example>", "alertas@corp.example", "Équipe Finanzas, S.A."),
    ('"Say \\"hi\\"" <a@corp.example>', "a@corp.example", 'Say "hi"'),
])
def test_sender_settings_people_write_are_understood(value, address, name):
    mailbox = parse_mailbox(value, "DUEFLOW_MAIL_FROM", dotted=False)
    assert (mailbox.address, mailbox.display_name) == (address, name)
    raw = message_bytes(OutgoingEmail("k", "to@x.example", "s", "b", "<p>b</p>", "<a@b.example>"), mailbox)
    parsed = message_from_bytes(raw, policy=policy.strict)["From"].addresses[0]
    assert (parsed.addr_spec, parsed.display_name) == (address, name)


@pytest.mark.parametrize("value", ["Finance", "a@b.example, c@d.example", "Name <a@b.example> x",
                                   "<>", "Name <not an address>", "x\r\n@b.example", "Ñame@corp.example"])
def test_a_sender_that_is_not_one_address_is_refused_with_one_line(value):
    with pytest.raises(ValueError, match="DUEFLOW_MAIL_FROM=") as refused:
        parse_mailbox(value, "DUEFLOW_MAIL_FROM")
    assert "\n" not in str(refused.value)


ids = st.text(st.characters(blacklist_categories=("Cs", "Cc")), min_size=1, max_size=200).filter(
    lambda s: s.strip() and not CONTROL.search(s))


@settings(max_examples=examples(150), deadline=None)
@given(subject=ids, day=st.dates(date(2000, 1, 1), date(2999, 12, 31)), lead=st.integers(0, 999),
       step=st.sampled_from(list(DunningStep)))
def test_keys_are_read_back_into_the_parts_they_were_made_of(subject, day, lead, step):
    renewal = parse_key(renewal_key(subject, day, lead))
    assert (renewal.job, renewal.subject_id, renewal.cycle, renewal.step_rank) == (
        "renewal", subject, day.isoformat(), lead)
    dunning = parse_key(dunning_key(subject, step))
    assert (dunning.job, dunning.subject_id, dunning.step, dunning.step_rank) == (
        "dunning", subject, step.value, step.rank)
    assert id_problems(pd.Series([subject])).isna().all()


@settings(max_examples=examples(100), deadline=None)
@given(keys=st.lists(ids.map(lambda subject: renewal_key(subject, date(2027, 1, 1), 30)) | ids.map(
    lambda subject: dunning_key(subject, DunningStep.REMINDED_2)) | st.text(max_size=40), max_size=8))
def test_keys_are_read_over_a_column_as_one_by_one(keys):
    """parse_keys (vectorised) reads every key as parse_key does, and NA where it refuses one."""
    parsed = parse_keys(pd.Series(keys, dtype=object))
    for key, row in zip(keys, parsed.itertuples(index=False), strict=True):
        try:
            one = parse_key(key)
        except ValueError:
            assert pd.isna(row.job) and pd.isna(row.subject_id)
            continue
        assert (row.job, row.subject_id, row.cycle, row.step, row.step_rank) == (
            one.job, one.subject_id, one.cycle, one.step, one.step_rank)


@pytest.mark.parametrize(("value", "problem"), [
    (None, "id missing"), ("  ", "id missing"), ("a\r\nb", "id contains control characters"),
    ("a\x00", "id contains control characters"), ("x" * 201, "id longer than 200 characters"),
    (b"a\xffb".decode("utf-8", "surrogateescape"), "id is not valid UTF-8"),
])
def test_ids_that_cannot_be_carried_are_named(value, problem):
    assert id_problems(pd.Series([value], dtype=object)).iloc[0] == problem
    assert not CONTROL.search(printable_id(value)) and len(printable_id(value)) <= 201


@pytest.mark.parametrize(("amount", "currency", "positive", "problem"), [
    ("123456789012345678.99", "EUR", True, None),
    ("123456789012345678.99", "JPY", True, "more decimals than JPY uses (0)"),
    ("1450.000", "JPY", True, None),
    ("12.345", "KWD", True, None),
    ("12.3456", "KWD", True, "more decimals than KWD uses (3)"),
    ("-200", "EUR", True, "credit note"),
    ("0", "EUR", True, "zero"),
    ("0", "EUR", False, None),
    ("-1", "EUR", False, "negative"),
    ("NaN", "EUR", False, "not a number"),
    ("1e9999", "EUR", False, "more than 30 digits"),
    ("1e29", "EUR", False, None),
    ("1,000.00", "EUR", False, "not a number"),
    (None, "EUR", False, "missing"),
])
def test_amounts_are_checked_exactly(amount, currency, positive, problem):
    found = amount_problems(pd.Series([amount], dtype=object), pd.Series([currency]), positive=positive)
    if problem is None:
        assert found.isna().all()
    else:
        assert problem in found.iloc[0]


def test_money_never_goes_through_a_float():
    assert format_money("123456789012345678.99", "EUR", "en") == "€123,456,789,012,345,678.99"
    assert format_money("123456789012345678.99", "EUR", "es") == "123.456.789.012.345.678,99\xa0€"
    assert format_money("0.1", "USD", "en") == "$0.10"
