"""Sample data for `dueflow demo`: every renewal lead and its boundaries, a believable
dunning night — a first reminder and a second one after the due date, an escalation of an
invoice reminded twice already — and a few bad rows."""

from __future__ import annotations

from datetime import date, timedelta

from sqlalchemy import Engine, text

from dueflow.sql import statement
from dueflow.tasks.adapters.db import in_source_schema, writing
from dueflow.tasks.core.keys import DunningStep, dunning_key

# The company the demo writes for, as a company's settings would say it (docs/emails.md):
# a sender a client can answer, replies to accounts receivable, how to pay, and where
# escalations go, by setting (blocks/table.py). `dueflow demo` uses each one whose variable
# the environment leaves unset.
SAMPLE_COMPANY = {
    "company_name": "Harbour Supplies Ltd",
    "mail_from": "billing@harbour-supplies.example",
    "mail_from_name": "Harbour Supplies",
    "reply_to": "accounts@harbour-supplies.example",
    # One section per language (tasks/core/render.py, payment_text): a Spanish or German
    # reminder says how to pay in its own words.
    "payment_instructions": "Bank transfer to Harbour Supplies Ltd\nIBAN GB33 BUKB 2020 1555 5555 55"
                            " (BIC BUKBGB22)\nPlease quote the invoice number as the reference.\n"
                            "[es]\nTransferencia bancaria a Harbour Supplies Ltd\n"
                            "IBAN GB33 BUKB 2020 1555 5555 55"
                            " (BIC BUKBGB22)\nIndique el número de factura como referencia.\n"
                            "[de]\nÜberweisung an Harbour Supplies Ltd\nIBAN GB33 BUKB 2020 1555 5555 55"
                            " (BIC BUKBGB22)\nBitte geben Sie die Rechnungsnummer als Verwendungszweck an.",
    "contract_contact": "Procurement, procurement@harbour-supplies.example",
    "escalation_to": "collections@harbour-supplies.example",
}

# (id, vendor, title, amount, currency, days until renewal or None, email, status)
SAMPLE_CONTRACTS = (
    ("c-001", "Acme Cloud", "Hosting plan", "12500.00", "EUR", 60, "finance@example.com", "active"),
    ("c-002", "Globex", "Support & maintenance", "4300.50", "USD", 45, "ops@example.com", "active"),
    ("c-003", "Initech", "Office licences", "890.00", "EUR", 30, "it@example.com", "active"),
    ("c-004", "Umbrella", "Cleaning services", "2100.00", "GBP", 22, "facilities@example.com",
     "active"),
    ("c-005", "Hooli", "Analytics suite", "15999.99", "EUR", 15, "cfo@example.com", "active"),
    ("c-006", "Stark Supplies", "Printer leasing", "640.00", "EUR", 7, "office@example.com",
     "active"),
    ("c-007", "Wayne Logistics", "Courier contract", "3100.00", "EUR", 0, "ops@example.com",
     "active"),
    ("c-008", "Cyberdyne", "Security audit", "7000.00", "EUR", -3, "cto@example.com", "active"),
    ("c-009", "Soylent", "Catering", "1200.00", "EUR", 90, "hr@example.com", "active"),
    ("c-010", "Tyrell", "Recruiting platform", "5000.00", "EUR", 30, "hr@example.com",
     "cancelled"),
    ("c-011", "Oscorp", "Lab equipment", "9800.00", "EUR", None, "lab@example.com", "active"),
    ("c-012", "Vandelay", "Import services", "450.00", "EUR", 30, "not-an-address", "active"),
    ("c-013", "Duff", "Beverages", "300.00", "EUR", 15, "events@example.com", "on hold"),
    ("c-014", "Prestige Worldwide", "Event hosting", "1800.00", "XYZ", 60, "events@example.com",
     "active"),
)


# (id, name, email, locale, paused)
SAMPLE_CLIENTS = (
    ("cl-1", "Northwind Traders", "ap@northwind.example", "en", False),
    ("cl-2", "Distribuciones Ñandú", "pagos@nandu.example", "es", False),
    ("cl-3", "Paused Holdings", "ap@paused.example", "en", True),
    ("cl-4", "Broken Address Inc", "accounts(at)broken", "en", False),
    ("cl-5", "Contoso Retail", "payables@contoso.example", "en", False),
)
# (id, client, number, amount, currency, days since sent or None, days since due, status):
# payment terms of 14 or 15 days, so every reminder tonight is about an invoice past due.
SAMPLE_INVOICES = (
    ("inv-101", "cl-1", "2026-0101", "1450.00", "EUR", 20, 6, "sent"),  # first reminder tonight
    ("inv-102", "cl-2", "2026-0102", "980.40", "EUR", 35, 21, "sent"),  # second reminder tonight
    ("inv-108", "cl-5", "2026-0108", "12400.00", "USD", 50, 35, "sent"),  # escalated tonight
    ("inv-103", "cl-1", "2026-0103", "300.00", "EUR", 3, -11, "sent"),  # not due yet: nothing
    ("inv-104", "cl-3", "2026-0104", "5000.00", "EUR", 30, 16, "sent"),  # client paused
    ("inv-105", "cl-1", "2026-0105", "120.00", "EUR", 40, 26, "void"),
    ("inv-106", "cl-4", "2026-0106", "75.00", "EUR", 12, -2, "sent"),  # no valid address
    ("inv-107", "cl-1", "2026-0107", None, "EUR", 15, 1, "sent"),  # no amount
)
# Reminders finance sent by hand before dueflow took over: (invoice, step, days ago).
SAMPLE_HISTORY = (
    ("inv-102", DunningStep.REMINDED_1, 8),
    ("inv-108", DunningStep.REMINDED_1, 20),
    ("inv-108", DunningStep.REMINDED_2, 12),
)


def seed_sample_data(engine: Engine, today: date, source_schema: str | None = None) -> int:
    """Insert the sample contracts, clients, invoices and their earlier reminders (dates
    relative to `today`) unless present; returns how many rows were added."""
    rows = [
        {"id": cid, "vendor": vendor, "title": title, "amount": amount, "currency": currency,
         "renewal_date": None if days is None else (today + timedelta(days=days)).isoformat(),
         "notify_email": email, "status": status}
        for cid, vendor, title, amount, currency, days, email, status in SAMPLE_CONTRACTS
    ]
    clients = [
        {"id": cid, "name": name, "email": email, "locale": locale, "notes": None, "paused": paused}
        for cid, name, email, locale, paused in SAMPLE_CLIENTS
    ]
    invoices = [
        {"id": iid, "client_id": cid, "number": number, "amount": amount, "currency": currency,
         "status": status, "due_date": (today - timedelta(days=overdue)).isoformat(),
         "sent_at": None if sent is None else f"{(today - timedelta(days=sent)).isoformat()}T09:00:00+00:00"}
        for iid, cid, number, amount, currency, sent, overdue, status in SAMPLE_INVOICES
    ]
    history = [
        {"key": dunning_key(iid, step), "subject_id": iid, "step": step.value,
         "step_rank": step.rank, "as_of": (today - timedelta(days=days)).isoformat()}
        for iid, step, days in SAMPLE_HISTORY
    ]
    with writing(engine) as conn:
        ledger = conn.execute(text(statement("sample_ledger")), history).rowcount
        in_source_schema(conn, source_schema)
        return ledger + sum(conn.execute(text(statement(name)), values).rowcount
                   for name, values in (("sample_contracts", rows), ("sample_clients", clients),
                                        ("sample_invoices", invoices)))
