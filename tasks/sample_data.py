"""Sample contracts for `dueflow demo`: every lead, the boundaries, and a few bad rows."""

from __future__ import annotations

from datetime import date, timedelta

from sqlalchemy import Engine, text

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


def seed_sample_data(engine: Engine, today: date) -> int:
    """Insert the sample contracts (renewal dates relative to `today`) unless present."""
    rows = [
        {"id": cid, "vendor": vendor, "title": title, "amount": amount, "currency": currency,
         "renewal_date": None if days is None else (today + timedelta(days=days)).isoformat(),
         "notify_email": email, "status": status}
        for cid, vendor, title, amount, currency, days, email, status in SAMPLE_CONTRACTS
    ]
    with engine.begin() as conn:
        result = conn.execute(
            text(
                "INSERT INTO contracts (id, vendor, title, amount, currency, renewal_date,"
                " notify_email, status) VALUES (:id, :vendor, :title, :amount,"
                " :currency, :renewal_date, :notify_email, :status)"
                " ON CONFLICT (id) DO NOTHING"
            ),
            rows,
        )
    return result.rowcount
