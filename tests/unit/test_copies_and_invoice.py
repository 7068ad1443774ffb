"""Copies and the invoice itself, in the pure core (issue 29): the message a reminder with a
Cc, an archive Bcc and its invoice PDF becomes, read back by Python's strict parser with
no defect anywhere; the Bcc in no header; the PDF named by a template no data can lead out
of its directory; a client's cc_email checked like every address; and every new setting
refused in one line when it cannot be used. Hostile values are generated (hypothesis)."""

from __future__ import annotations

import hashlib
import posixpath
from datetime import date, timedelta
from email import message_from_bytes, policy
from email.message import EmailMessage

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dueflow.blocks.errors import ConfigError
from dueflow.blocks.settings import Settings
from dueflow.tasks.core.addresses import Mailbox, is_address
from dueflow.tasks.core.dunning_rule import due_dunning_steps
from dueflow.tasks.core.invoice_pdf import (
    TemplateError,
    invoice_pdf_paths,
    name_problems,
    parse_pdf_template,
)
from dueflow.tasks.core.message import (
    FILE_NAME_LIMIT,
    AttachmentChanged,
    OutgoingEmail,
    attachment_name,
    envelope_recipients,
    message_bytes,
    message_id_for,
)
from dueflow.tasks.core.text import clean_line
from tests import examples

SENDER = Mailbox("ar@acme.example", "Acme Finance")
PDF = b"%PDF-1.7\n" + bytes(range(256)) * 40 + b"\n%%EOF\n"
KEY = "dunning/inv-1/REMINDED_1"


def reminder(name: str = "F-2027-001.pdf", data: bytes = PDF, **extra) -> OutgoingEmail:
    fields = {"cc_recipient": "manager@acme.example", "bcc_recipient": "archive@acme.example",
              "attachment_path": "/srv/invoices/F-2027-001.pdf", "attachment_name": name,
              "attachment_sha256": hashlib.sha256(data).hexdigest(), "attachment_size": len(data)} | extra
    return OutgoingEmail(KEY, "ap@client.example", "Reminder: invoice F-2027-001", "Please pay.\n",
                         "<p>Please pay.</p>", message_id_for(KEY, SENDER), **fields)


def defects(message: EmailMessage) -> list:
    """Every defect the strict parser found: the message's, each part's, each header's."""
    found = []
    for part in message.walk():
        found += part.defects
        found += [d for name in part for d in getattr(part[name], "defects", ())]
    return found


def test_a_reminder_with_copies_and_its_pdf_reads_back_without_a_defect():
    raw = message_bytes(reminder(), SENDER, attachment=PDF)
    message = message_from_bytes(raw, policy=policy.strict)
    assert defects(message) == []
    assert message.get_content_type() == "multipart/mixed"
    assert [p.get_content_type() for p in message.walk()] == [
        "multipart/mixed", "multipart/alternative", "text/plain", "text/html", "application/pdf"]
    assert message["Cc"].addresses[0].addr_spec == "manager@acme.example"
    assert "Bcc" not in message and b"archive@acme.example" not in raw  # envelope only
    (attachment,) = message.iter_attachments()
    assert attachment.get_filename() == "F-2027-001.pdf" and attachment.get_content() == PDF
    assert attachment["Content-Transfer-Encoding"] == "base64"
    assert message.get_body(("html",)).get_content() == "<p>Please pay.</p>"
    assert all(len(line) <= 998 for line in raw.split(b"\r\n"))


def test_without_a_pdf_the_message_is_the_alternative_alone_and_without_copies_no_cc():
    plain = OutgoingEmail(KEY, "ap@client.example", "s", "t\n", "<p>t</p>", message_id_for(KEY, SENDER))
    message = message_from_bytes(message_bytes(plain, SENDER), policy=policy.strict)
    assert message.get_content_type() == "multipart/alternative" and "Cc" not in message
    assert envelope_recipients(plain) == ["ap@client.example"]


def test_each_copy_is_one_recipient_of_the_envelope_and_a_copy_to_the_recipient_is_none():
    assert envelope_recipients(reminder()) == ["ap@client.example", "manager@acme.example",
                                               "archive@acme.example"]
    same = reminder(cc_recipient="AP@client.example", bcc_recipient="ap@client.example")
    assert envelope_recipients(same) == ["ap@client.example"]
    assert "Cc" not in message_from_bytes(message_bytes(same, SENDER, attachment=PDF), policy=policy.strict)


@pytest.mark.parametrize("data", [PDF[:-1], PDF + b"x", PDF.replace(b"%%EOF", b"%%EOG"), None])
def test_bytes_that_are_not_the_stored_file_are_refused_before_anything_is_built(data):
    with pytest.raises(AttachmentChanged):
        message_bytes(reminder(), SENDER, attachment=data)


def test_an_attachment_no_row_names_is_refused():
    plain = OutgoingEmail(KEY, "ap@client.example", "s", "t", "<p>t</p>", message_id_for(KEY, SENDER))
    with pytest.raises(ValueError, match="names none"):
        message_bytes(plain, SENDER, attachment=PDF)


@pytest.mark.parametrize("copy", ["a@b.example\r\nBcc: x@y.example", "two@@x.example",
                                  "x@y.example, z@y.example"])
def test_a_copy_that_is_not_one_address_never_reaches_a_header(copy):
    with pytest.raises(ValueError, match="copy recipient"):
        message_bytes(reminder(cc_recipient=copy), SENDER, attachment=PDF)


file_names = st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=200)


@settings(max_examples=examples(100), deadline=None)
@given(name=st.one_of(file_names, st.sampled_from([
    'a"b.pdf', "a\\b.pdf", "=?utf-8?b?QUJD?=.pdf", "Factura Ñandú «2027».pdf", "x" * 200 + ".pdf",
    "a\r\nContent-Type: text/html.pdf", "ünïcödé " * 30, "%41%42.pdf", "a;b=c.pdf", "🧾.pdf",
    '""', '"F-1.pdf"', "<F-1.pdf>", "a:b|c?.pdf"])))
def test_any_file_name_reads_back_on_one_line_and_never_adds_a_header(name):
    shown = attachment_name(name)
    try:
        raw = message_bytes(reminder(name=name), SENDER, attachment=PDF)
    except ValueError as refused:
        assert not shown and "empty" in str(refused)
        return
    message = message_from_bytes(raw, policy=policy.strict)
    assert defects(message) == []
    (attachment,) = message.iter_attachments()
    assert attachment.get_filename() == shown and attachment.get_content() == PDF
    assert list(attachment.keys()) == ["Content-Type", "Content-Disposition", "Content-Transfer-Encoding"]
    assert all(len(line) <= 998 for line in raw.split(b"\r\n"))
    assert b"\n" not in raw.replace(b"\r\n", b"")


# --------------------------------------------------------------------------- templates


@pytest.mark.parametrize(("template", "directory"), [
    ("/srv/invoices/{number}.pdf", "/srv/invoices"),
    ("/srv/{client_id}/{number}.pdf", "/srv"),
    ("/srv/invoices/inv-{invoice_id}.pdf", "/srv/invoices"),
    ("/srv/invoices/", "/srv/invoices"),
    ("/srv//invoices/{number}.pdf", "/srv/invoices"),
])
def test_templates_people_write_name_their_invoice_directory(template, directory):
    assert parse_pdf_template(template).directory == directory


@pytest.mark.parametrize(("template", "problem"), [
    ("invoices/{number}.pdf", "not an absolute path"), ("/{number}.pdf", "no directory"),
    ("/srv/invoice.pdf", "one file for every invoice"), ("/srv/{amount}.pdf", "unknown field"),
    ("/srv/{number!r}.pdf", "unknown field"), ("/srv/{number:>9}.pdf", "unknown field"),
    ("/srv/../etc/{number}", "has a .. in its path"), ("/srv/{", "malformed"),
    ("/srv/\x00/{number}.pdf", "control characters"), ("/", "root directory"), ("//", "root directory"),
])
def test_a_template_that_cannot_be_used_is_one_line_naming_the_setting(template, problem):
    with pytest.raises(TemplateError, match="DUEFLOW_INVOICE_PDF=") as refused:
        parse_pdf_template(template)
    assert problem in str(refused.value) and "\n" not in str(refused.value)


templates = st.one_of(
    st.text(max_size=60),
    st.builds(lambda a, f, b: a + f + b, st.text(max_size=30),
              st.sampled_from(["{number}", "{invoice_id}", "{client_id}", "{x}", "{", "}"]),
              st.text(max_size=20)),
    st.builds(lambda d: f"/{d}/{{number}}.pdf", st.text(max_size=30)),
)


@settings(max_examples=examples(100), deadline=None)
@given(template=templates)
def test_every_template_is_refused_or_names_a_directory_below_the_root(template):
    try:
        parsed = parse_pdf_template(template)
    except TemplateError as refused:
        assert "\n" not in str(refused)
        return
    assert parsed.directory.startswith("/") and parsed.directory != "/"
    assert posixpath.normpath(parsed.directory) == parsed.directory


hostile = st.one_of(
    st.text(max_size=80),
    st.sampled_from(["../../etc/passwd", "..", ".", "a/../../b", "/etc/passwd", "a\x00b", "\x00",
                     "..\\..\\windows", "%2e%2e%2fetc", "a/b", " ", "", "x" * 300, "ok\n", "F-1"]),
    st.builds(lambda a, b: a + "/../" + b, st.text(max_size=10), st.text(max_size=10)),
)


@settings(max_examples=examples(100), deadline=None)
@given(numbers=st.lists(hostile, min_size=1, max_size=6), ids=st.lists(hostile, min_size=6, max_size=6),
       own=st.lists(st.one_of(st.none(), hostile), min_size=6, max_size=6),
       template=st.sampled_from(["/srv/invoices/{number}.pdf", "/srv/invoices/{client_id}/{number}.pdf",
                                 "/srv/invoices/"]))
def test_no_value_in_the_data_names_a_file_outside_the_invoice_directory(numbers, ids, own, template):
    parsed = parse_pdf_template(template)
    rows = pd.DataFrame({"number": numbers, "subject_id": ids[:len(numbers)], "client_id": ids[:len(numbers)],
                         "pdf_path": own[:len(numbers)]})
    named = invoice_pdf_paths(parsed, rows)
    for path, name, note in zip(named["path"], named["name"], named["note"], strict=True):
        if pd.isna(path):
            assert isinstance(note, str) and note.startswith("not attached: ") and "\n" not in note
            continue
        assert pd.isna(note)
        assert path.startswith("/srv/invoices/") and posixpath.normpath(path) == path
        assert ".." not in path.split("/") and "\x00" not in path
        assert name == clean_line(path.rsplit("/", 1)[1], FILE_NAME_LIMIT) and name


def test_a_field_value_is_one_file_name_or_says_why_not():
    values = pd.Series(["F-1", "../x", "a/b", "..", "a\x00b", None, " ", "x" * 201, "Ñ-1"])
    assert name_problems(values).fillna("").tolist() == [
        "", "has a path separator", "has a path separator", "is . or ..", "has control characters",
        "is missing", "is missing", "is longer than 200 characters", ""]


# --------------------------------------------------------------------------- cc_email

AS_OF = date(2027, 3, 1)


def decide_with_cc(ccs: list[object]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """One night over one invoice per client, client i with cc_email ccs[i]: the rule is a
    column rule, so one decision over many values tests as much as many decisions."""
    n = len(ccs)
    invoices = pd.DataFrame({"id": [f"inv-{i}" for i in range(n)], "client_id": [f"cl-{i}" for i in range(n)],
                             "number": [f"F-{i}" for i in range(n)], "amount": "10.00", "currency": "EUR",
                             "status": "sent",
                             "sent_at": (AS_OF - timedelta(days=8)).isoformat() + "T09:00:00+00:00",
                             "due_date": AS_OF.isoformat(), "paid_at": None}, dtype=object)
    clients = pd.DataFrame({"id": [f"cl-{i}" for i in range(n)], "name": "Client",
                            "email": "ap@client.example", "locale": "en", "notes": None,
                            "dunning_paused": "false",
                            "cc_email": pd.Series(ccs, dtype=object)}, dtype=object)
    history = pd.DataFrame(columns=["subject_id", "step", "step_rank", "as_of", "attempt_as_of", "status"])
    decision = due_dunning_steps(invoices, clients, history, AS_OF)
    return decision.due, decision.quarantined


cc_values = st.one_of(st.none(), st.text(max_size=80), st.emails(), st.sampled_from([
    "", "  ", "manager@acme.example", " manager@acme.example ", "a@b.example\r\nBcc: x@y.example",
    "a@b.example, c@d.example", "Name <a@b.example>", "=?utf-8?b?QUJD?=@x.example", "a..b@x.example",
    "ap@client.example", "AP@CLIENT.EXAMPLE", "ñ@x.example", "a@b.example\x00"]))


@settings(max_examples=examples(30), deadline=None)
@given(ccs=st.lists(cc_values, min_size=1, max_size=40))
def test_a_cc_email_is_a_copy_an_absence_or_a_quarantine_reason(ccs):
    due, quarantined = decide_with_cc(ccs)
    due = due.set_index("subject_id")
    quarantined = quarantined.set_index("source_id")
    for i, cc in enumerate(ccs):
        invoice = f"inv-{i}"
        blank = cc is None or not cc.strip()
        if not blank and not is_address(cc.strip()):
            assert invoice not in due.index
            reason = quarantined.loc[invoice, "reason"]
            assert reason.startswith("client cc_email is not a valid address") and "\n" not in reason
            continue
        assert invoice not in quarantined.index and invoice in due.index
        copy = due.loc[invoice, "cc_recipient"]
        if blank or cc.strip().lower() == "ap@client.example":
            assert pd.isna(copy)  # none, or the recipient itself: no copy
        else:
            assert copy == cc.strip() and is_address(copy)


def test_the_escalation_carries_no_copy_for_the_account_manager():
    invoices = pd.DataFrame([{"id": "inv-1", "client_id": "cl", "number": "F-1", "amount": "10.00",
                              "currency": "EUR", "status": "sent", "sent_at": "2027-01-01T09:00:00+00:00",
                              "due_date": "2027-01-31", "paid_at": None}], dtype=object)
    clients = pd.DataFrame([{"id": "cl", "name": "C", "email": "ap@client.example", "locale": "en",
                             "notes": None, "dunning_paused": "false", "cc_email": "m@acme.example"}],
                           dtype=object)
    history = pd.DataFrame([{"subject_id": "inv-1", "step": s, "step_rank": r, "as_of": d,
                             "attempt_as_of": d, "status": "sent"}
                            for s, r, d in (("REMINDED_1", 1, "2027-02-01"),
                                            ("REMINDED_2", 2, "2027-02-10"))])
    due = due_dunning_steps(invoices, clients, history, AS_OF, escalation_to="collections@acme.example").due
    assert due["step"].tolist() == ["OVERDUE"] and due["cc_recipient"].isna().all()


# --------------------------------------------------------------------------- settings

BASE = {"DUEFLOW_DATABASE_URL": "sqlite:///x.db", "DUEFLOW_MAIL_URL": "file:///tmp/outbox"}


@pytest.mark.parametrize(("name", "value", "said"), [
    ("DUEFLOW_BCC", "archive", "DUEFLOW_BCC='archive' is not an email address"),
    ("DUEFLOW_BCC", "a@b.example, c@d.example", "DUEFLOW_BCC="),
    ("DUEFLOW_BCC", "a@b.example\r\nX: y", "DUEFLOW_BCC="),
    ("DUEFLOW_INVOICE_PDF", "invoices/{number}.pdf", "not an absolute path"),
    ("DUEFLOW_INVOICE_PDF", "/srv/{number}/../x", "has a .. in its path"),
    ("DUEFLOW_INVOICE_PDF_MAX_BYTES", "10MB", "DUEFLOW_INVOICE_PDF_MAX_BYTES='10MB' must be a whole number"),
    ("DUEFLOW_INVOICE_PDF_MAX_BYTES", "0", "must be a whole number from 1 to"),
    ("DUEFLOW_INVOICE_PDF_MAX_BYTES", "999999999999", "must be a whole number from 1 to"),
    ("DUEFLOW_RETAIN_BODIES_DAYS", "-1", "DUEFLOW_RETAIN_BODIES_DAYS='-1' must be a whole number"),
    ("DUEFLOW_RETAIN_BODIES_DAYS", "0", "must be a whole number from 1 to 36500"),
    ("DUEFLOW_RETAIN_BODIES_DAYS", "30d", "must be a whole number"),
])
def test_a_new_setting_that_cannot_be_used_stops_the_start_with_one_line(name, value, said):
    with pytest.raises(ConfigError) as refused:
        Settings.from_env(BASE | {name: value})
    assert said in str(refused.value) and "\n" not in str(refused.value)


def test_the_new_settings_as_people_write_them():
    settings = Settings.from_env(BASE | {"DUEFLOW_BCC": "Archive <archive@acme.example>",
                                         "DUEFLOW_INVOICE_PDF": "/srv/invoices/{number}.pdf",
                                         "DUEFLOW_INVOICE_PDF_MAX_BYTES": "2000000",
                                         "DUEFLOW_RETAIN_BODIES_DAYS": "400"})
    assert settings.bcc_address() == "archive@acme.example" == settings.email_look().bcc
    template = settings.invoice_pdf_template()
    assert template is not None and (template.directory, template.max_bytes) == ("/srv/invoices", 2_000_000)
    assert settings.retain_bodies_days == 400
    unset = Settings.from_env(BASE)
    assert (unset.bcc_address(), unset.invoice_pdf_template(), unset.retain_bodies_days) == (None, None, None)


@settings(max_examples=examples(200), deadline=None)
@given(name=st.sampled_from(["DUEFLOW_BCC", "DUEFLOW_INVOICE_PDF", "DUEFLOW_INVOICE_PDF_MAX_BYTES",
                             "DUEFLOW_RETAIN_BODIES_DAYS"]),
       value=st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=60))
def test_any_value_of_a_new_setting_is_taken_or_refused_in_one_line(name, value):
    try:
        settings = Settings.from_env(BASE | {name: value})
    except ConfigError as refused:
        assert str(refused).startswith(name) and "\n" not in str(refused)
        return
    if name == "DUEFLOW_BCC" and value.strip():
        assert is_address(settings.bcc_address())


# --------------------------------------------------------------------------- email_block


@settings(max_examples=examples(200), deadline=None)
@given(name=st.one_of(st.text(max_size=250), st.sampled_from(
    ["acme", " acme ", "", "   ", "a\nb", "a\x00", "x" * 201, "Acme Ibérica", "../acme"])))
def test_the_email_block_parameter_is_a_block_name_or_one_line_that_says_it_is_not(name):
    settings = Settings.from_env(BASE)
    try:
        chosen = settings.with_parameters(email_block=name)
    except ConfigError as refused:
        assert str(refused).startswith("parameter email_block: ") and "\n" not in str(refused)
        return
    if not name.strip():
        assert chosen.email_block is None  # empty: DUEFLOW_EMAIL_BLOCK, here unset
    else:
        assert chosen.email_block == name.strip() and "\n" not in name and len(name) <= 200


# --------------------------------------------------------------------------- bounces of copies


def test_a_bounce_of_a_copy_is_kept_aside_and_never_marks_the_recipients_row():
    from dueflow.tasks.core.bounces import KeptReason, match_reports, parse_report, reports_frame
    from tests.helpers import bounce_reports as br

    key = "dunning/inv-0/REMINDED_1"
    ids = message_id_for(key, SENDER)
    row = pd.DataFrame({"key": [key], "message_id": [ids], "status": ["sent"],
                        "sending_at": ["2027-01-07 06:00:00+00:00"], "recipient": ["client@example.org"],
                        "cc_recipient": ["Manager@Acme.example"], "bcc_recipient": ["archive@acme.example"]})
    reports = reports_frame([
        *parse_report(br.postfix(br.Original(ids, key, recipient="manager@acme.example")), "cc"),
        *parse_report(br.postfix(br.Original(ids, key, recipient="archive@acme.example")), "bcc"),
        *parse_report(br.postfix(br.Original(ids, key, recipient="client@example.org")), "to"),
    ])
    matched = match_reports(reports, row)
    assert matched.bounces["source"].tolist() == ["to"]  # only the recipient's bounce marks the row
    assert dict(zip(matched.kept["source"], matched.kept["reason"], strict=True)) == {
        "cc": KeptReason.COPY, "bcc": KeptReason.COPY}
    assert "is a copy of dunning/inv-0/REMINDED_1" in matched.kept["detail"].iloc[0]
