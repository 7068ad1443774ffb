"""The emails as a company sends them, end to end: its name, signature, Reply-To and
payment link on real messages through a real SMTP server; its own templates, and a broken
one refused before anything is written; the HTML laid out by a real browser (headless
Chromium, the operating system's package) at desktop and phone widths — skipped where
there is no browser."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from datetime import date, timedelta
from pathlib import Path

import pandas as pd
import pytest
from sqlalchemy import text

from dueflow.blocks.errors import ConfigError
from dueflow.flows.nightly_alerts import nightly_alerts
from dueflow.tasks.adapters import db
from dueflow.tasks.core.addresses import Mailbox
from dueflow.tasks.core.llm_guard import rule_drafts
from dueflow.tasks.core.locales import SUPPORTED_LOCALES
from dueflow.tasks.core.phrasebook import default_phrasebook
from dueflow.tasks.core.render import EmailLook, compose_dunning_emails, compose_renewal_alerts
from tests.helpers.factories import client, contract, insert, invoice

AS_OF = date(2027, 3, 1)
COMPANY = {
    "DUEFLOW_MAIL_FROM_NAME": "Acme Finanzas",
    "DUEFLOW_REPLY_TO": "Cuentas a cobrar <ar@acme.example>",
    "DUEFLOW_COMPANY_NAME": "Acme Ibérica S.L.",
    "DUEFLOW_SIGNATURE": "Ana García\\nCuentas a cobrar · +34 910 000 000",
    "DUEFLOW_PAYMENT_INSTRUCTIONS": "Transferencia a ES91 2100 0418 4502 0005 1332\\nConcepto: la factura",
    "DUEFLOW_PAYMENT_LINK": "https://pay.acme.example/invoice/{invoice_id}?amount={amount}"
                            "&currency={currency}",
    "DUEFLOW_CONTRACT_CONTACT": "legal@acme.example",
    "DUEFLOW_TIMEZONE": "Europe/Madrid",
    "DUEFLOW_ESCALATION_TO": "collections@acme.example",
}


def seed(url: str) -> None:
    insert(url, "contracts", [contract("c-today", AS_OF),
                              contract("c-soon", AS_OF + timedelta(days=30))])
    insert(url, "clients", [client("cl-es", locale="es", name="Distribuciones Ñandú"),
                            client("cl-en", name=None)])
    sent = (AS_OF - timedelta(days=20)).isoformat() + "T09:00:00+00:00"
    insert(url, "invoices", [
        invoice("inv-es", "cl-es", sent, due_date=(AS_OF - timedelta(days=6)).isoformat()),
        invoice("inv-en", "cl-en", sent, due_date=(AS_OF + timedelta(days=5)).isoformat(),
                currency="JPY", amount="145000")])


def ledger_rows(url: str) -> int:
    with db.engine_for(url).connect() as conn:
        return conn.execute(text("SELECT count(*) FROM dueflow_ledger")).scalar_one()


def test_a_company_sends_the_emails_as_they_are(run_env, smtp_sink, monkeypatch, tmp_path):
    for name, value in COMPANY.items():
        monkeypatch.setenv(name, value)
    overrides = tmp_path / "templates"
    overrides.mkdir()
    (overrides / "renewal.en.subject").write_text(
        "[Contracts] {{ title }} of {{ vendor }} renews {{ when }}\n")
    monkeypatch.setenv("DUEFLOW_TEMPLATES_DIR", str(overrides))
    seed(run_env)
    summary = nightly_alerts(as_of=AS_OF)
    assert summary.sent == 4 and summary.failed == summary.pending == summary.quarantined == 0
    messages = smtp_sink.by_key()
    for key, message in messages.items():
        assert message["From"].addresses[0].display_name == "Acme Finanzas"
        assert message["Reply-To"].addresses[0].addr_spec == "ar@acme.example"
        assert re.search(r" \+0[12]00$", message["Date"]), message["Date"]  # Madrid's real offset
        assert message.get_body(("plain",))["Content-Transfer-Encoding"] == "quoted-printable"
        for part in ("plain", "html"):
            body = message.get_body((part,)).get_content()
            assert key not in body and not re.search(r"REMINDED_\d|OVERDUE|renewal/|dunning/", body)
        assert "Acme Ibérica S.L." in message.get_body(("html",)).get_content()
    today = messages[f"renewal/c-today/{AS_OF}/15d"]
    assert today["Subject"] == "[Contracts] Service of Vendor c-today renews today"  # the override
    assert "legal@acme.example" in today.get_body(("plain",)).get_content()
    soon = messages[f"renewal/c-soon/{AS_OF + timedelta(days=30)}/30d"]
    assert soon["Subject"].endswith("renews in 30 days")
    spanish = messages["dunning/inv-es/REMINDED_1"]
    body = spanish.get_body(("plain",)).get_content()
    assert spanish["Subject"] == ("Recordatorio de pago: factura F-inv-es (980,40 €),"
                                  " venció el 23 de febrero de 2027")
    assert "venció el 23 de febrero de 2027 (hace 6 días)" in body
    assert "https://pay.acme.example/invoice/inv-es?amount=980.40&currency=EUR" in body
    assert "Ana García\r\nCuentas a cobrar · +34 910 000 000" in body  # CRLF: MIME's text lines
    english = messages["dunning/inv-en/REMINDED_1"]
    body = english.get_body(("plain",)).get_content()
    assert body.startswith("Hello,")  # the client has no name: no "Dear ,"
    assert "falls due in 5 days, on 6 March 2027" in body and "overdue" not in body
    assert "¥145,000" in body and "¥145,000.00" not in body
    raw = next(r for r in smtp_sink.raw if b"X-Dueflow-Key: dunning/inv-en/REMINDED_1" in r)
    assert b"\r\nHello,\r\n\r\nThis is a friendly reminder that invoice F-inv-en for =C2=A5145,000" in raw


def test_a_broken_override_stops_the_run_before_anything_is_written(run_env, smtp_sink, monkeypatch,
                                                                   tmp_path):
    overrides = tmp_path / "templates"
    overrides.mkdir()
    (overrides / "dunning.es.txt").write_text("Hola {{ client_name }},\n{{ importe }}\n")
    (overrides / "README.md").write_text("Our templates: not one itself, and not refused.\n")
    monkeypatch.setenv("DUEFLOW_TEMPLATES_DIR", str(overrides))
    monkeypatch.setenv("DUEFLOW_ESCALATION_TO", "collections@acme.example")
    seed(run_env)
    with pytest.raises(ConfigError) as refused:
        nightly_alerts(as_of=AS_OF)
    assert str(refused.value) == ("DUEFLOW_TEMPLATES_DIR: dunning.es.txt, line 2 does not render:"
                                  " 'importe' is undefined")
    assert ledger_rows(run_env) == 0 and smtp_sink.keys() == []


def test_the_cli_says_it_in_one_line(dueflow_cli, cli_env, tmp_path):
    overrides = tmp_path / "templates"
    overrides.mkdir()
    (overrides / "renewal.es.html").write_text(
        "{% extends '_layout.html' %}{% block content %}{{ vendor }\n")
    result = dueflow_cli("run", "--as-of", AS_OF.isoformat(),
                         env=cli_env | {"DUEFLOW_TEMPLATES_DIR": str(overrides)})
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert lines == [lines[0]] and lines[0].startswith(
        "dueflow: error: DUEFLOW_TEMPLATES_DIR: renewal.es.html, line 1 does not render:"), result.stderr
    assert ledger_rows(cli_env["DUEFLOW_DATABASE_URL"]) == 0


# --------------------------------------------------------------------------- the browser

CHROMIUM = next((p for p in map(shutil.which, ("chromium", "chromium-browser", "google-chrome")) if p),
                None)
WIDTHS = {"desktop": 1000, "phone": 390}


def sample_emails(look: EmailLook) -> dict[str, str]:
    """One HTML body of each kind in each locale, rendered as the flow renders them."""
    sender = Mailbox("alerts@acme.example")
    renewal = pd.DataFrame([{"key": "renewal/c-1/2027-03-31/30d", "recipient": "cfo@acme.example",
                             "vendor": "Globex Corporation International",
                             "title": "Support & maintenance",
                             "amount": "4300.50", "currency": "USD", "renewal_date": date(2027, 3, 31),
                             "days_left": 30, "step_rank": 30}])
    dunning = pd.DataFrame([{
        "key": f"dunning/inv-{n}/{step}", "subject_id": f"inv-{n}", "step": step, "step_rank": rank,
        "recipient": "ap@client.example", "number": f"2026-01{n:02d}", "amount": "1234567.89",
        "currency": "EUR", "issue_date": date(2027, 1, 15), "due_date": date(2027, 2, 14),
        "client_id": "cl-1", "client_name": "Distribuciones Ñandú del Mediterráneo, S.L.",
        "client_email": "cuentas.por.pagar@distribuciones-nandu-mediterraneo.example", "locale": locale,
    } for n, (step, rank, locale) in enumerate([("REMINDED_1", 1, "en"), ("REMINDED_2", 2, "es"),
                                                 ("OVERDUE", 3, "en"), ("REMINDED_1", 1, "de")])])
    history = pd.DataFrame({"subject_id": ["inv-2", "inv-2"], "step": ["REMINDED_1", "REMINDED_2"],
                            "step_rank": [1, 2], "as_of": ["2027-02-10", "2027-02-17"],
                            "attempt_as_of": [None, None], "status": ["sent", "adopted"]})
    pages = {}
    for locale in SUPPORTED_LOCALES:
        [email] = compose_renewal_alerts(renewal, locale, sender, look).emails
        pages[f"renewal-{locale}"] = email.body_html
    drafts = {d.key: d for d in rule_drafts(dunning, pd.DataFrame(), date(2027, 3, 1), default_phrasebook())}
    composed = compose_dunning_emails(dunning, history, sender, drafts, as_of=date(2027, 3, 1), look=look)
    for email, row in zip(composed.emails, dunning.itertuples(), strict=True):
        pages[f"{row.step.lower()}-{row.locale}"] = email.body_html
    return pages


def harness(pages: dict[str, str], width: int) -> str:
    """Each email in an iframe `width` pixels wide, as a phone shows it (a headless window is
    never narrower than 500 px); each iframe's scroll width is written on the page's body as
    data-scroll-<name>, so one browser measures every email."""
    frames = []
    for name, html in pages.items():
        quoted = html.replace("&", "&amp;").replace('"', "&quot;")
        frames.append(f'<iframe style="width:{width}px;height:1700px;border:0;display:block"'
                      f' srcdoc="{quoted}"'
                      f" onload=\"document.body.setAttribute('data-scroll-{name}',"
                      " this.contentDocument.documentElement.scrollWidth)\"></iframe>")
    return f'<!doctype html><html><body style="margin:0;background:#888">{"".join(frames)}</body></html>'


@pytest.mark.skipif(CHROMIUM is None, reason="needs headless Chromium (apt-get install chromium)")
def test_the_html_fits_a_desktop_and_a_phone_in_a_real_browser(tmp_path):
    """Every email's HTML in Chromium 1000 px and 390 px wide: nothing wider than the
    screen (no sideways scrolling on a phone); with DUEFLOW_SCREENSHOTS_DIR set, a screenshot
    of each there for a person to look at."""
    look = EmailLook(company="Acme Ibérica S.L.", signature="Ana García\nCuentas a cobrar",
                     payment_instructions="Transferencia a ES91 2100 0418 4502 0005 1332\nConcepto: F-1",
                     payment_link="https://pay.acme.example/invoice/{invoice_id}",
                     contract_contact="legal@acme.example")
    pages = sample_emails(look)
    shots = os.environ.get("DUEFLOW_SCREENSHOTS_DIR")
    for label, width in WIDTHS.items():
        common = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                  f"--window-size={max(width, 500)},1700"]
        page = tmp_path / f"all-{label}.html"
        page.write_text(harness(pages, width), encoding="utf-8")
        dom = subprocess.run([*common, "--dump-dom", page.as_uri()], capture_output=True,
                             text=True, timeout=60).stdout
        for name in pages:
            measured = re.search(rf'data-scroll-{name}="(\d+)"', dom)
            assert measured, (name, dom[:300])
            assert int(measured.group(1)) <= width, (name, label, measured.group(1))
        if not shots:  # a picture of each email for a person to look at, when asked for
            continue
        Path(shots).mkdir(parents=True, exist_ok=True)
        for name, html in pages.items():
            one = tmp_path / f"{name}-{label}.html"
            one.write_text(harness({name: html}, width), encoding="utf-8")
            png = Path(shots) / f"{name}-{label}.png"
            subprocess.run([*common, f"--screenshot={png}", one.as_uri()], capture_output=True, timeout=60)
            assert png.exists() and png.stat().st_size > 5000
