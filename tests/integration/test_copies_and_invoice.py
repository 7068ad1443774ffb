"""Copies and the invoice itself against real parts (issue 29): a real SMTP server
(aiosmtpd) sees the Cc and the archive Bcc as recipients of the envelope while the message
it receives names the Bcc nowhere; invoice PDFs read from a real directory — links,
FIFOs, sparse files of gigabytes, files that change under a stored message; and retention
on SQLite and PostgreSQL, which never touches a pending, failed or bounced row and keeps
every key, status and date."""

from __future__ import annotations

import hashlib
import os
from datetime import date, timedelta
from email import message_from_bytes, policy
from pathlib import Path

import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import text

from dueflow.blocks.endpoints import parse_mail_url
from dueflow.tasks.adapters import db
from dueflow.tasks.adapters.invoice_files import (
    NotAttached,
    TooLarge,
    attached_bytes,
    read_invoice_pdf,
    with_invoice_pdfs,
)
from dueflow.tasks.adapters.mail import open_transport
from dueflow.tasks.core.addresses import Mailbox
from dueflow.tasks.core.invoice_pdf import parse_pdf_template
from dueflow.tasks.core.message import AttachmentChanged, OutgoingEmail, message_bytes, message_id_for
from dueflow.tasks.core.statuses import SendStatus
from tests import examples
from tests.helpers.smtp_server import SmtpSink

SENDER = Mailbox("ar@acme.example", "Acme Finance")
PDF = b"%PDF-1.7\n" + os.urandom(3000) + b"\n%%EOF\n"


def reminder(path: Path, data: bytes = PDF, key: str = "dunning/inv-1/REMINDED_1") -> OutgoingEmail:
    """A reminder as its ledger row stores it: copies, and the PDF named by size and hash."""
    return OutgoingEmail(
        key, "ap@client.example", "Reminder: invoice F-1", "Please pay.\n", "<p>Please pay.</p>",
        message_id_for(key, SENDER), cc_recipient="manager@acme.example",
        bcc_recipient="archive@acme.example", attachment_path=str(path), attachment_name=path.name,
        attachment_sha256=hashlib.sha256(data).hexdigest(), attachment_size=len(data))


@pytest.fixture
def sink():
    server = SmtpSink()
    server.start()
    try:
        yield server
    finally:
        server.stop()


def send(sink: SmtpSink, email: OutgoingEmail):
    with open_transport(parse_mail_url(f"smtp://127.0.0.1:{sink.port}"), SENDER) as transport:
        return transport.send(email)


# --------------------------------------------------------------------------- SMTP


def test_the_copies_are_envelope_recipients_and_the_bcc_is_in_no_header(sink, tmp_path):
    pdf = tmp_path / "F-1.pdf"
    pdf.write_bytes(PDF)
    result = send(sink, reminder(pdf))
    assert result.status == SendStatus.SENT, result
    assert sink.envelope_to == [["ap@client.example", "manager@acme.example", "archive@acme.example"]]
    (raw,) = sink.raw
    assert b"archive@acme.example" not in raw and b"\nbcc:" not in raw.lower()
    (received,) = sink.messages
    assert received["To"].addresses[0].addr_spec == "ap@client.example"
    assert received["Cc"].addresses[0].addr_spec == "manager@acme.example"
    strict = message_from_bytes(raw, policy=policy.strict)
    assert not strict.defects and [a.get_content() for a in strict.iter_attachments()] == [PDF]


def test_a_copy_the_server_refuses_does_not_hold_back_the_recipients_email(sink, tmp_path):
    pdf = tmp_path / "F-1.pdf"
    pdf.write_bytes(PDF)
    sink.faults["manager@acme.example"] = "rcpt_550"
    result = send(sink, reminder(pdf))
    assert result.status == SendStatus.SENT
    assert "copy to manager@acme.example refused: 550" in (result.smtp_response or "")
    assert sink.envelope_to == [["ap@client.example", "archive@acme.example"]]


def test_a_recipient_the_server_refuses_is_failed_whatever_the_copies(sink, tmp_path):
    pdf = tmp_path / "F-1.pdf"
    pdf.write_bytes(PDF)
    sink.faults["ap@client.example"] = "rcpt_550"
    result = send(sink, reminder(pdf))
    assert (result.status, result.permanent) == (SendStatus.FAILED, True)
    assert sink.messages == [] and sink.data_seen == []


@pytest.mark.parametrize("change", ["edited", "truncated", "grown", "vanished", "swapped for a link"])
def test_a_stored_message_whose_pdf_changed_is_not_sent_and_says_why(sink, tmp_path, change):
    pdf = tmp_path / "F-1.pdf"
    pdf.write_bytes(PDF)
    email = reminder(pdf)  # stored: size and SHA-256 of PDF
    if change == "edited":
        pdf.write_bytes(PDF[:100] + b"X" + PDF[101:])
    elif change == "truncated":
        pdf.write_bytes(PDF[:-1])
    elif change == "grown":
        pdf.write_bytes(PDF + b"appended")
    elif change == "vanished":
        pdf.unlink()
    else:
        other = tmp_path / "other.pdf"
        other.write_bytes(PDF)
        pdf.unlink()
        pdf.symlink_to(other)
    result = send(sink, email)
    assert result.status == SendStatus.FAILED and not result.permanent  # a restored file goes out later
    assert "invoice PDF" in (result.error or "") and "not sent" in (result.error or "")
    assert sink.data_seen == []  # not a byte of it reached the server
    pdf.unlink(missing_ok=True)
    pdf.write_bytes(PDF)  # put back: the identical bytes go out
    assert send(sink, email).status == SendStatus.SENT
    assert [a.get_content() for a in sink.messages[0].iter_attachments()] == [PDF]


def test_the_file_outbox_writes_what_the_recipient_sees(tmp_path):
    pdf = tmp_path / "F-1.pdf"
    pdf.write_bytes(PDF)
    with open_transport(parse_mail_url(f"file://{tmp_path / 'outbox'}"), SENDER) as transport:
        assert transport.send(reminder(pdf)).status == SendStatus.SENT
    (eml,) = (tmp_path / "outbox").glob("*.eml")
    message = message_from_bytes(eml.read_bytes(), policy=policy.strict)
    assert message["Cc"] and "Bcc" not in message and b"archive@" not in eml.read_bytes()
    assert [a.get_filename() for a in message.iter_attachments()] == ["F-1.pdf"]


# --------------------------------------------------------------------------- files


@pytest.fixture
def invoices(tmp_path) -> Path:
    folder = tmp_path / "invoices"
    folder.mkdir()
    (tmp_path / "secret.pdf").write_bytes(b"%PDF-1.4 payroll")  # beside it, never inside
    return folder


def test_files_that_may_not_be_attached_say_why(invoices):
    template = parse_pdf_template(f"{invoices}/{{number}}.pdf", max_bytes=4096)
    (invoices / "ok.pdf").write_bytes(PDF[:4096 - 7] + b"%%EOF\n\n")
    (invoices / "exact.pdf").write_bytes(b"%PDF-" + b"x" * (4096 - 5))
    (invoices / "over.pdf").write_bytes(b"%PDF-" + b"x" * (4096 - 4))
    (invoices / "empty.pdf").write_bytes(b"")
    (invoices / "text.pdf").write_bytes(b"<html>not a pdf</html>")
    (invoices / "escape.pdf").symlink_to(invoices.parent / "secret.pdf")
    (invoices / "dir.pdf").mkdir()
    os.mkfifo(invoices / "fifo.pdf")
    with open(invoices / "huge.pdf", "wb") as handle:  # 6 GB, sparse: never read
        handle.write(b"%PDF-")
        handle.truncate(6 * 1024 ** 3)
    assert read_invoice_pdf(str(invoices / "ok.pdf"), template)[:5] == b"%PDF-"
    assert len(read_invoice_pdf(str(invoices / "exact.pdf"), template)) == 4096
    reasons = {}
    for name in ("over", "empty", "text", "escape", "dir", "fifo", "huge", "missing"):
        with pytest.raises(NotAttached) as refused:
            read_invoice_pdf(str(invoices / f"{name}.pdf"), template)
        reasons[name] = str(refused.value)
    with pytest.raises(TooLarge):  # refused by its size: never read
        read_invoice_pdf(str(invoices / "huge.pdf"), template)
    assert "4,097 bytes, over DUEFLOW_INVOICE_PDF_MAX_BYTES=4,096" in reasons["over"]
    assert "6,442,450,944 bytes, over" in reasons["huge"]
    assert "is empty" in reasons["empty"] and "is not a PDF" in reasons["text"]
    assert "outside the invoice directory" in reasons["escape"]
    assert "not a regular file" in reasons["dir"] and "not a regular file" in reasons["fifo"]
    assert "does not exist" in reasons["missing"]


@settings(max_examples=examples(60), deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(numbers=st.lists(st.one_of(
    st.text(max_size=40),
    st.sampled_from(["../secret", "../secret.pdf", "..", "./F-1", "F-1", "F-1/../../secret", "\x00",
                     "F-1\x00.pdf", "escape", "/etc/passwd", "link"])), min_size=1, max_size=8),
       paths=st.lists(st.one_of(st.none(), st.text(max_size=40), st.sampled_from([
           "../secret.pdf", "F-1.pdf", "sub/../../secret.pdf", "/etc/passwd", "link.pdf", "escape.pdf"])),
           min_size=8, max_size=8))
def test_no_number_or_pdf_path_attaches_a_file_outside_the_directory(invoices, numbers, paths):
    (invoices / "F-1.pdf").write_bytes(PDF)
    if not (invoices / "escape.pdf").is_symlink():
        (invoices / "escape.pdf").symlink_to(invoices.parent / "secret.pdf")
    template = parse_pdf_template(f"{invoices}/{{number}}.pdf")
    rows = pd.DataFrame({"number": numbers, "subject_id": "i", "client_id": "c",
                         "pdf_path": paths[:len(numbers)]})
    attached = with_invoice_pdfs(rows, template)
    secret = hashlib.sha256(b"%PDF-1.4 payroll").hexdigest()
    real = os.path.realpath(invoices)
    for row in attached.itertuples(index=False):
        if isinstance(row.attachment_sha256, str):
            assert row.attachment_sha256 == hashlib.sha256(PDF).hexdigest() != secret
            assert os.path.commonpath([real, row.attachment_path]) == real
        else:
            assert row.attachment_note.startswith("not attached: ") and "\n" not in row.attachment_note


def test_the_bytes_read_at_send_time_are_at_most_the_stored_size(tmp_path):
    pdf = tmp_path / "F-1.pdf"
    pdf.write_bytes(PDF)
    email = reminder(pdf)
    assert attached_bytes(email) == PDF
    with open(pdf, "ab") as handle:
        handle.truncate(5 * 1024 ** 3)  # grew to 5 GB: refused by its size, not read
    with pytest.raises(AttachmentChanged, match="invoice PDF changed or vanished"):
        attached_bytes(email)
    with pytest.raises(AttachmentChanged):
        message_bytes(email, SENDER, attachment=PDF + b"x")


# --------------------------------------------------------------------------- retention

AS_OF = date(2027, 3, 1)
OLD, RECENT = AS_OF - timedelta(days=400), AS_OF - timedelta(days=5)
ROWS = [  # key, status, as_of, claimed
    ("dunning/s-old/REMINDED_1", "sent", OLD, True),
    ("dunning/s-new/REMINDED_1", "sent", RECENT, True),
    ("dunning/a-old/REMINDED_1", "adopted", OLD, False),
    ("dunning/p-old/REMINDED_1", "pending", OLD, True),
    ("dunning/u-old/REMINDED_1", "pending", OLD, False),
    ("dunning/f-old/REMINDED_1", "failed", OLD, True),
    ("dunning/b-old/REMINDED_1", "bounced", OLD, True),
]
KEPT = ("key", "job", "subject_id", "cycle", "step", "step_rank", "as_of", "status", "attempts",
        "message_id", "attempt_as_of", "created_at", "sent_at", "sending_at", "attachment_sha256",
        "attachment_size", "draft_source")
PRUNED = ("recipient", "previous_recipient", "cc_recipient", "bcc_recipient", "subject", "body_text",
          "body_html", "paragraph", "draft_note", "smtp_response", "error", "attachment_path",
          "attachment_name", "attachment_note")


def load_ledger(url: str) -> None:
    with db.engine_for(url).begin() as conn:
        for key, status, as_of, claimed in ROWS:
            conn.execute(text(
                "INSERT INTO dueflow_ledger (key, job, subject_id, cycle, step, step_rank, as_of, status,"
                " attempts, recipient, previous_recipient, cc_recipient, bcc_recipient, subject, body_text,"
                " body_html, message_id, paragraph, draft_source, draft_note, smtp_response, error,"
                " attachment_path, attachment_name, attachment_sha256, attachment_size, attachment_note,"
                " attempt_as_of, sending_at, sent_at) VALUES (:key, 'dunning', :sid, '', 'REMINDED_1', 1,"
                " :as_of, :status, 1, 'ap@client.example', 'old@client.example', 'm@acme.example',"
                " 'archive@acme.example', 'Reminder F-1', 'Dear Client', '<p>Dear Client</p>', :mid,"
                " 'A kind paragraph.', 'llm', 'tone: warm', '250 OK', :error, '/srv/invoices/F-1.pdf',"
                " 'F-1.pdf', :sha, 1234, NULL, :as_of, :sending, :sent)"),
                {"key": key, "sid": key.split("/")[1], "as_of": as_of.isoformat(), "status": status,
                 "mid": f"<{key.split('/')[1]}@acme.example>", "sha": "ab" * 32,
                 "error": "bounced: 5.1.1" if status == "bounced" else None,
                 "sending": "2026-01-01 06:00:00+00:00" if claimed else None,
                 "sent": "2026-01-01 06:00:01+00:00" if status == "sent" else None})


def rows(url: str) -> dict[str, dict]:
    with db.engine_for(url).connect() as conn:
        return {r["key"]: dict(r) for r in conn.execute(text("SELECT * FROM dueflow_ledger")).mappings()}


def test_prune_keeps_keys_statuses_and_dates_and_never_touches_an_open_row(db_url):
    load_ledger(db_url)
    before = rows(db_url)
    assert db.prune_bodies(db.engine_for(db_url), AS_OF - timedelta(days=30), batch=1) == 2
    after = rows(db_url)
    assert set(after) == set(before)  # every key stays (G1)
    for key, row in after.items():
        for column in KEPT:
            assert str(row[column]) == str(before[key][column]), (key, column)
        if key in ("dunning/s-old/REMINDED_1", "dunning/a-old/REMINDED_1"):
            assert row["pruned_at"] is not None and all(row[c] is None for c in PRUNED), key
        else:  # recent, pending (claimed or not), failed, bounced: untouched, every column
            assert row == before[key], key
    assert db.prune_bodies(db.engine_for(db_url), AS_OF - timedelta(days=30)) == 0  # once


def test_a_pruned_row_still_settles_its_key_for_the_next_night(db_url):
    load_ledger(db_url)
    db.prune_bodies(db.engine_for(db_url), AS_OF)
    states = db.ledger_states(db.engine_for(db_url), [k for k, *_ in ROWS])
    assert dict(zip(states["key"], states["status"], strict=True)) == {k: s for k, s, *_ in ROWS}
    pruned = rows(db_url)["dunning/s-new/REMINDED_1"]
    assert pruned["pruned_at"] is not None and pruned["message_id"] == "<s-new@acme.example>"


def test_check_says_where_the_invoices_are_and_whether_they_can_be_read(tmp_path):
    from dueflow.blocks.settings import Settings
    from dueflow.tasks.check import check_copies_and_invoices

    base = {"DUEFLOW_DATABASE_URL": "sqlite:///x.db", "DUEFLOW_MAIL_URL": f"file://{tmp_path}"}
    assert check_copies_and_invoices(Settings.from_env(base)) is None  # nothing set: nothing said
    missing = check_copies_and_invoices(Settings.from_env(base | {
        "DUEFLOW_INVOICE_PDF": f"{tmp_path}/nowhere/{{number}}.pdf"}))
    assert missing is not None and not missing.ok and "is not a folder" in missing.detail
    (tmp_path / "invoices").mkdir()
    found = check_copies_and_invoices(Settings.from_env(base | {
        "DUEFLOW_INVOICE_PDF": f"{tmp_path}/invoices/{{number}}.pdf", "DUEFLOW_BCC": "archive@acme.example",
        "DUEFLOW_RETAIN_BODIES_DAYS": "400"}))
    assert found is not None and found.ok
    assert "archive@acme.example" in found.detail and "after 400 day(s)" in found.detail
