"""Sample contracts for `dueflow demo`: every lead, the boundaries, and a few bad rows."""

from __future__ import annotations

from datetime import date, timedelta

from sqlalchemy import Engine, text

from dueflow.sql import statement
from dueflow.tasks.adapters.db import writing

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
)
# (id, client, number, amount, currency, days since sent or None, status)
SAMPLE_INVOICES = (
    ("inv-101", "cl-1", "2026-0101", "1450.00", "EUR", 8, "sent"),
    ("inv-102", "cl-2", "2026-0102", "980.40", "EUR", 21, "sent"),
    ("inv-103", "cl-1", "2026-0103", "300.00", "EUR", 3, "sent"),
    ("inv-104", "cl-3", "2026-0104", "5000.00", "EUR", 30, "sent"),
    ("inv-105", "cl-1", "2026-0105", "120.00", "EUR", 40, "void"),
    ("inv-106", "cl-4", "2026-0106", "75.00", "EUR", 12, "sent"),
    ("inv-107", "cl-1", "2026-0107", None, "EUR", 15, "sent"),
)


def seed_sample_data(engine: Engine, today: date) -> int:
    """Insert the sample contracts, clients and invoices (dates relative to `today`)
    unless present; returns how many rows were added."""
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
         "status": status, "due_date": (today + timedelta(days=30)).isoformat(),
         "sent_at": None if days is None else f"{(today - timedelta(days=days)).isoformat()}T09:00:00+00:00"}
        for iid, cid, number, amount, currency, days, status in SAMPLE_INVOICES
    ]
    with writing(engine) as conn:
        return sum(conn.execute(text(statement(name)), values).rowcount
                   for name, values in (("sample_contracts", rows), ("sample_clients", clients),
                                        ("sample_invoices", invoices)))
