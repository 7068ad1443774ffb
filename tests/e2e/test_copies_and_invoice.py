"""Copies, the invoice itself and retention through the nightly flow (issue 29), on SQLite
and PostgreSQL, against a real SMTP server: a reminder goes to the client with a Cc to the
account manager and its invoice PDF attached, every email has the archive as a recipient of
its envelope and in none of its headers; a bad cc_email quarantines its row; a missing PDF
is sent without and said; a retry after the PDF changed is not sent, visibly, and goes out
with the identical bytes once the file is back; `dueflow prune` and DUEFLOW_RETAIN_BODIES_DAYS
remove bodies and addresses of settled rows and keep every key, status and date, and the
export and `dueflow invoices --id` say so. The reminder is kept as an `.eml`, read by
Python's strict parser, and shown in headless Chromium (DUEFLOW_SCREENSHOTS_DIR keeps it)."""

from __future__ import annotations

import hashlib
import html
import json
import os
import shutil
import subprocess
from datetime import date, timedelta
from email import message_from_bytes, policy
from pathlib import Path

import pytest
from sqlalchemy import text

from dueflow.flows.nightly_alerts import nightly_alerts
from dueflow.tasks.adapters import db
from tests.helpers.factories import client, contract, insert, invoice

AS_OF = date(2027, 3, 1)
SENT = (AS_OF - timedelta(days=8)).isoformat() + "T09:00:00+00:00"  # REMINDED_1 is due
CHROMIUM = next((p for p in map(shutil.which, ("chromium", "chromium-browser")) if p), None)


def invoice_pdf(number: str) -> bytes:
    """A small, valid one-page PDF that says which invoice it is."""
    stream = f"BT /F1 24 Tf 72 720 Td (Invoice {number}) Tj ET".encode()
    objects = [b"<< /Type /Catalog /Pages 2 0 R >>", b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
               b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R"
               b" /Resources << /Font << /F1 5 0 R >> >> >>",
               b"<< /Length " + str(len(stream)).encode() + b" >>\nstream\n" + stream + b"\nendstream",
               b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>"]
    out, offsets = bytearray(b"%PDF-1.4\n"), []
    for n, body in enumerate(objects, 1):
        offsets.append(len(out))
        out += f"{n} 0 obj\n".encode() + body + b"\nendobj\n"
    xref = len(out)
    out += f"xref\n0 {len(objects) + 1}\n0000000000 65535 f \n".encode()
    out += b"".join(f"{o:010d} 00000 n \n".encode() for o in offsets)
    out += f"trailer\n<< /Size {len(objects) + 1} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n".encode()
    return bytes(out)


@pytest.fixture
def company(run_env, monkeypatch, tmp_path) -> Path:
    """A company with an archive Bcc and its invoices in a folder; returns the folder."""
    folder = tmp_path / "invoices"
    folder.mkdir()
    monkeypatch.setenv("DUEFLOW_BCC", "Archive <archive@acme.example>")
    monkeypatch.setenv("DUEFLOW_INVOICE_PDF", f"{folder}/{{number}}.pdf")
    monkeypatch.setenv("DUEFLOW_COMPANY_NAME", "Acme Ibérica S.L.")
    monkeypatch.setenv("DUEFLOW_MAIL_FROM", "Acme Finance <ar@acme.example>")
    return folder


def ledger(url: str) -> dict[str, dict]:
    with db.engine_for(url).connect() as conn:
        return {r["key"]: dict(r) for r in conn.execute(text("SELECT * FROM dueflow_ledger")).mappings()}


def raw_of(sink, key: str) -> bytes:
    return next(r for r in sink.raw if f"X-Dueflow-Key: {key}".encode() in r)


def envelope_of(sink, key: str) -> list[str]:
    return next(to for raw, to in zip(sink.raw, sink.envelope_to, strict=True)
                if f"X-Dueflow-Key: {key}".encode() in raw)


def test_a_night_sends_the_reminder_with_its_copies_and_its_invoice(run_env, smtp_sink, company, tmp_path):
    pdf = invoice_pdf("F-2027-001")
    (company / "F-2027-001.pdf").write_bytes(pdf)
    (tmp_path / "payroll.pdf").write_bytes(invoice_pdf("payroll"))  # beside the folder: never attached
    insert(run_env, "clients", [client("cl-a", name="Distribuciones Ñandú", cc_email="manager@acme.example"),
                                client("cl-bad", cc_email="manager at acme"),
                                client("cl-none", cc_email=None)])
    insert(run_env, "invoices", [invoice("inv-a", "cl-a", SENT, number="F-2027-001"),
                                 invoice("inv-bad", "cl-bad", SENT),
                                 invoice("inv-missing", "cl-none", SENT, number="F-missing"),
                                 invoice("inv-escape", "cl-none", SENT, number="../payroll")])
    insert(run_env, "contracts", [contract("c1", AS_OF + timedelta(days=30))])

    summary = nightly_alerts(as_of=AS_OF)

    assert (summary.sent, summary.failed, summary.pending, summary.quarantined) == (4, 0, 0, 1)
    bad = summary.rows[summary.rows["status"] == "quarantined"]
    assert bad["detail"].tolist() == ["client cc_email is not a valid address: 'manager at acme': it is not a"
                                      " plain ASCII address name@domain (one @; no spaces, quotes, brackets"
                                      " or accents)"]
    key = "dunning/inv-a/REMINDED_1"
    # At the real SMTP server: the copies are recipients of the envelope, the Bcc in no header.
    assert envelope_of(smtp_sink, key) == ["cl-a@clients.example", "manager@acme.example",
                                           "archive@acme.example"]
    raw = raw_of(smtp_sink, key)
    assert b"archive@acme.example" not in raw and b"\nbcc:" not in raw.lower()
    message = message_from_bytes(raw, policy=policy.strict)
    assert [part.defects for part in message.walk()] == [[]] * 5
    assert (message["To"], message["Cc"]) == ("cl-a@clients.example", "manager@acme.example")
    (attachment,) = message.iter_attachments()
    assert (attachment.get_content_type(), attachment.get_filename()) == ("application/pdf", "F-2027-001.pdf")
    assert attachment.get_content() == pdf
    assert "The invoice is attached (F-2027-001.pdf)." in message.get_body(("plain",)).get_content()
    renewal = f"renewal/c1/{AS_OF + timedelta(days=30)}/30d"
    for other in ("dunning/inv-missing/REMINDED_1", "dunning/inv-escape/REMINDED_1", renewal):
        assert envelope_of(smtp_sink, other)[1:] == ["archive@acme.example"]  # no Cc, the archive
        parsed = message_from_bytes(raw_of(smtp_sink, other), policy=policy.strict)
        assert "Cc" not in parsed and list(parsed.iter_attachments()) == []
        assert b"archive@acme.example" not in raw_of(smtp_sink, other)

    rows = ledger(run_env)
    stored = rows[key]
    assert (stored["attachment_sha256"], int(stored["attachment_size"])) == (hashlib.sha256(pdf).hexdigest(),
                                                                             len(pdf))
    assert stored["cc_recipient"] == "manager@acme.example"
    assert stored["bcc_recipient"] == "archive@acme.example"
    assert "F-missing.pdf does not exist" in rows["dunning/inv-missing/REMINDED_1"]["attachment_note"]
    assert "its number '../payroll' has a path separator" in rows["dunning/inv-escape/REMINDED_1"][
        "attachment_note"]
    (warning,) = [w for w in summary.warnings if "invoice PDF" in w]
    assert warning.startswith("2 reminder(s) go without their invoice PDF") and "F-missing.pdf" in warning

    shots = Path(os.environ.get("DUEFLOW_SCREENSHOTS_DIR") or tmp_path)
    shots.mkdir(parents=True, exist_ok=True)
    (shots / "reminder-with-invoice.eml").write_bytes(raw)
    if CHROMIUM:
        show_in_chromium(shots / "reminder-with-invoice.eml", shots / "reminder-with-invoice.png")


def show_in_chromium(eml: Path, png: Path) -> None:
    """The .eml as a mail client shows it — its headers, its HTML part, its attachments —
    read by Python's strict parser and drawn by headless Chromium."""
    message = message_from_bytes(eml.read_bytes(), policy=policy.strict)
    assert all(not part.defects for part in message.walk())
    headers = "".join(f"<tr><th>{name}</th><td>{html.escape(str(message[name]))}</td></tr>"
                      for name in ("From", "To", "Cc", "Subject", "Date") if message[name])
    attachments = "".join(
        f"<li>[attachment] <b>{html.escape(part.get_filename())}</b> — {part.get_content_type()},"
        f" {len(data):,} bytes, sha256 {hashlib.sha256(data).hexdigest()[:16]}…</li>"
        for part in message.iter_attachments() if (data := part.get_content()))
    body = message.get_body(("html",)).get_content()
    page = eml.with_suffix(".html")
    page.write_text(
        "<!doctype html><html><body style='font-family:sans-serif;margin:0;background:#eee'>"
        f"<div style='background:#fff;padding:12px 20px'><table>{headers}</table>"
        f"<p style='margin:8px 0 0'>Attachments:</p><ul id='attachments'>{attachments}</ul></div>"
        f"<iframe style='width:100%;height:760px;border:0' srcdoc=\"{html.escape(body, quote=True)}\">"
        "</iframe></body></html>", encoding="utf-8")
    subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu",
                    "--disable-background-networking", "--disable-component-update", "--disable-sync",
                    "--no-first-run", "--hide-scrollbars",
                    f"--user-data-dir={png.parent / '.chromium'}", f"--screenshot={png}",
                    "--window-size=1000,1100", page.as_uri()], capture_output=True, timeout=120)
    assert png.exists() and png.stat().st_size > 10_000
    shutil.rmtree(png.parent / ".chromium", ignore_errors=True)


def test_one_statement_per_client_carries_every_invoice_and_goes_once(run_env, smtp_sink, company,
                                                                      tmp_path, monkeypatch):
    """DUEFLOW_STATEMENTS=reminders, through the flow and a real SMTP server: a client's three
    reminders of one night are one message with three PDFs, each key sent once; a rerun
    sends nothing (docs/design.md, "Statements")."""
    monkeypatch.setenv("DUEFLOW_STATEMENTS", "reminders")
    pdfs = {n: invoice_pdf(n) for n in ("F-1", "F-2", "F-3")}
    for number, data in pdfs.items():
        (company / f"{number}.pdf").write_bytes(data)
    insert(run_env, "clients", [client("cl-es", locale="es", name="Distribuciones Ñandú",
                                       cc_email="manager@acme.example"), client("cl-one", cc_email=None)])
    insert(run_env, "invoices", [invoice("inv-1", "cl-es", SENT, number="F-1", amount="1200.00"),
                                 invoice("inv-2", "cl-es", SENT, number="F-2", amount="80.50"),
                                 invoice("inv-3", "cl-es", SENT, number="F-3", amount="15.00",
                                         currency="USD"),
                                 invoice("inv-4", "cl-one", SENT)])

    summary = nightly_alerts(as_of=AS_OF)

    assert (summary.sent, summary.failed, summary.pending) == (4, 0, 0)
    assert len(smtp_sink.raw) == 2  # one statement, one reminder
    carrier = "dunning/inv-1/REMINDED_1"
    raw = raw_of(smtp_sink, carrier)
    assert envelope_of(smtp_sink, carrier) == ["cl-es@clients.example", "manager@acme.example",
                                               "archive@acme.example"]
    message = message_from_bytes(raw, policy=policy.strict)
    assert all(not part.defects for part in message.walk())
    assert message["Subject"] == "Recordatorio de pago: 3 facturas (1.280,50 € + 15,00 US$), vencidas"
    attached = {part.get_filename(): part.get_content() for part in message.iter_attachments()}
    assert attached == {f"{n}.pdf": data for n, data in pdfs.items()}  # the bytes each row names
    text_body = message.get_body(("plain",)).get_content()
    assert all(f"Factura {n}" in text_body for n in pdfs) and "Total: 1.280,50" in text_body
    rows = ledger(run_env)
    members = [f"dunning/inv-{n}/REMINDED_1" for n in (1, 2, 3)]
    assert {rows[k]["status"] for k in members} == {"sent"}
    assert {rows[k]["statement_key"] for k in members} == {carrier}
    assert {rows[k]["message_id"] for k in members} == {message["Message-ID"]}
    assert [rows[k]["attachment_name"] for k in members] == ["F-1.pdf", "F-2.pdf", "F-3.pdf"]
    again = nightly_alerts(as_of=AS_OF)
    assert again.sent == 0 and len(smtp_sink.raw) == 2

    shots = Path(os.environ.get("DUEFLOW_SCREENSHOTS_DIR") or tmp_path)
    shots.mkdir(parents=True, exist_ok=True)
    (shots / "statement.eml").write_bytes(raw)
    if CHROMIUM:
        show_in_chromium(shots / "statement.eml", shots / "statement.png")


def attempt(url: str, key: str) -> tuple[int, str, object]:
    """The row's attempts, error and retry_after."""
    with db.engine_for(url).connect() as conn:
        row = conn.execute(text("SELECT attempts, error, retry_after FROM dueflow_ledger WHERE key = :k"),
                           {"k": key}).one()
    return int(row.attempts), row.error, row.retry_after


def test_a_retry_after_the_pdf_changed_fails_visibly_and_sends_the_identical_bytes_once_restored(
        run_env, smtp_sink, company):
    pdf = invoice_pdf("F-7")
    (company / "F-7.pdf").write_bytes(pdf)
    insert(run_env, "clients", [client("cl", cc_email="manager@acme.example")])
    insert(run_env, "invoices", [invoice("inv-7", "cl", SENT, number="F-7")])
    key = "dunning/inv-7/REMINDED_1"
    smtp_sink.faults["cl@clients.example"] = "rcpt_451"  # the first attempt is refused: failed
    first = nightly_alerts(as_of=AS_OF, retry_backoff_minutes=0)
    assert first.failed == 1 and smtp_sink.messages == []
    stored = ledger(run_env)[key]["attachment_sha256"]
    assert stored == hashlib.sha256(pdf).hexdigest()

    del smtp_sink.faults["cl@clients.example"]
    (company / "F-7.pdf").write_bytes(invoice_pdf("F-7 (corrected)"))  # replaced under the ledger
    second = nightly_alerts(as_of=AS_OF + timedelta(days=1), retry_backoff_minutes=0)
    row = second.rows[second.rows["key"] == key].iloc[0]
    assert row["status"] == "failed" and row["retry"]
    assert "not sent again: the invoice PDF is not the one its first message carried" in row["detail"]
    assert f"sha256 {stored[:16]}" in row["detail"] and "put the original file back" in row["detail"]
    assert smtp_sink.data_seen == [] and ledger(run_env)[key]["status"] == "failed"
    # The refused retry counts as an attempt, with its own reason in the row (issue 36, case 5).
    assert attempt(run_env, key)[:2] == (2, row["detail"])

    (company / "F-7.pdf").unlink()  # vanished: still not sent, still said, counted
    third = nightly_alerts(as_of=AS_OF + timedelta(days=2), retry_backoff_minutes=0)
    assert "does not exist" in third.rows[third.rows["key"] == key].iloc[0]["detail"]
    assert smtp_sink.data_seen == [] and attempt(run_env, key)[0] == 3
    nightly_alerts(as_of=AS_OF + timedelta(days=2), retry_backoff_minutes=0)  # the last of 3 was spent
    assert attempt(run_env, key)[0] == 3 and smtp_sink.data_seen == []  # it waits for a person
    more = {"retry_backoff_minutes": 60, "retry_max_attempts": 5}
    nightly_alerts(as_of=AS_OF + timedelta(days=2), **more)
    assert attempt(run_env, key)[0] == 4 and attempt(run_env, key)[2] is not None  # the back-off moves
    nightly_alerts(as_of=AS_OF + timedelta(days=2), **more)
    assert attempt(run_env, key)[0] == 4  # and is waited for

    (company / "F-7.pdf").write_bytes(pdf)  # restored: the identical bytes go out, once
    with db.engine_for(run_env).begin() as conn:  # the back-off over
        conn.execute(text("UPDATE dueflow_ledger SET retry_after = NULL WHERE key = :k"), {"k": key})
    fourth = nightly_alerts(as_of=AS_OF + timedelta(days=3), retry_backoff_minutes=0, retry_max_attempts=5)
    assert fourth.sent == 1 and smtp_sink.keys() == [key]
    (attachment,) = smtp_sink.messages[0].iter_attachments()
    assert attachment.get_content() == pdf
    assert nightly_alerts(as_of=AS_OF + timedelta(days=3)).sent == 0 and smtp_sink.keys() == [key]


PAST = date(2026, 6, 1)  # before today: retention counts back from the earlier of the night and today


def test_retention_prunes_settled_rows_and_the_export_and_history_say_so(run_env, smtp_sink, company,
                                                                        dueflow_cli, cli_env, monkeypatch):
    (company / "F-9.pdf").write_bytes(invoice_pdf("F-9"))
    insert(run_env, "clients", [client("cl", cc_email="manager@acme.example")])
    sent = (PAST - timedelta(days=8)).isoformat() + "T09:00:00+00:00"
    insert(run_env, "invoices", [invoice("inv-9", "cl", sent, number="F-9", due_date="2026-06-30"),
                                 invoice("inv-f", "cl", sent, number="F-f", due_date="2026-06-30")])
    smtp_sink.faults["nobody@clients.example"] = "rcpt_550"
    with db.engine_for(run_env).begin() as conn:  # inv-f's client address is refused: failed
        conn.execute(text("INSERT INTO clients (id, name, email, locale, dunning_paused)"
                          " VALUES ('cl-f', 'F', 'nobody@clients.example', 'en', false)"))
        conn.execute(text("UPDATE invoices SET client_id = 'cl-f' WHERE id = 'inv-f'"))
    night = nightly_alerts(as_of=PAST)
    assert (night.sent, night.failed) == (1, 1)
    before = ledger(run_env)

    too_late = dueflow_cli("prune", "--bodies-before", "2999-01-01", env=cli_env)
    assert too_late.returncode == 2 and too_late.stderr.count("\n") == 1 and "after today" in too_late.stderr
    pruned = dueflow_cli("prune", "--bodies-before", (PAST + timedelta(days=1)).isoformat(), env=cli_env)
    assert pruned.returncode == 0, pruned.stderr
    cut = PAST + timedelta(days=1)
    assert pruned.stdout.startswith(f"Pruned 1 settled row(s) whose step got out before {cut}")
    after = ledger(run_env)
    kept, failed = after["dunning/inv-9/REMINDED_1"], after["dunning/inv-f/REMINDED_1"]
    assert kept["pruned_at"] is not None and kept["body_text"] is None and kept["recipient"] is None
    assert kept["cc_recipient"] is None and kept["bcc_recipient"] is None and kept["subject"] is None
    assert (kept["key"], kept["status"], str(kept["as_of"])[:10]) == ("dunning/inv-9/REMINDED_1", "sent",
                                                                      str(PAST))
    assert kept["attachment_sha256"] == before["dunning/inv-9/REMINDED_1"]["attachment_sha256"]
    assert failed == before["dunning/inv-f/REMINDED_1"]  # a failed row is never pruned

    exported = [json.loads(line) for line in
                dueflow_cli("ledger", "--format", "json", env=cli_env).stdout.splitlines()]
    by_key = {r["key"]: r for r in exported}
    assert by_key["dunning/inv-9/REMINDED_1"]["pruned_at"] and by_key["dunning/inv-9/REMINDED_1"][
        "recipient"] is None
    assert by_key["dunning/inv-f/REMINDED_1"]["pruned_at"] is None
    table = dueflow_cli("ledger", env=cli_env).stdout
    assert "(pruned 20" in table  # the recipient column says when, not a blank
    history = dueflow_cli("invoices", "--id", "inv-9", env=cli_env).stdout
    assert "addresses and bodies pruned" in history and "invoice PDF (586 bytes, sha256" in history

    again = nightly_alerts(as_of=PAST)  # the key stays: nothing is sent twice (G1)
    assert again.sent == 0 and smtp_sink.keys() == ["dunning/inv-9/REMINDED_1"]

    # The nightly run prunes by itself with DUEFLOW_RETAIN_BODIES_DAYS: here the row that
    # failed, settled since by an operator as sent.
    with db.engine_for(run_env).begin() as conn:
        conn.execute(text("UPDATE dueflow_ledger SET status = 'sent' WHERE key = 'dunning/inv-f/REMINDED_1'"))
    monkeypatch.setenv("DUEFLOW_RETAIN_BODIES_DAYS", "30")
    later = nightly_alerts(as_of=PAST + timedelta(days=60))
    assert later.pruned == 1 and ledger(run_env)["dunning/inv-f/REMINDED_1"]["pruned_at"] is not None
