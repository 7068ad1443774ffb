"""Rows for the source tables, inserted through the same SQL on both backends."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import date

from sqlalchemy import Engine, text

from dueflow.tasks.adapters import db


def sourced(url_or_engine: str | Engine) -> db.Database:
    """The database of a test, with its (sample) source relations resolved, as a run has it."""
    url = url_or_engine if isinstance(url_or_engine, str) else url_or_engine.url.render_as_string(
        hide_password=False)
    return db.Database(url).with_sources()


def insert(url: str, table: str, rows: Sequence[dict]) -> None:
    if not rows:
        return
    columns = list(rows[0])
    with db.engine_for(url).begin() as conn:
        conn.execute(
            text(f"INSERT INTO {table} ({', '.join(columns)}) "
                 f"VALUES ({', '.join(':' + c for c in columns)})"),
            [dict(r) for r in rows],
        )


# The user's own tables: the public contract's columns, and no primary key.
OWN_TABLES = {
    "contracts": "id text, vendor text, title text, amount {money}, currency text, renewal_date date,"
                 " notify_email text, status text",
    "clients": "id text, name text, email text, locale text, notes text, dunning_paused {flag}",
    "invoices": "id text, client_id text, number text, amount {money}, currency text, status text,"
                " sent_at {stamp}, due_date date, paid_at {stamp}",
}
OWN_TYPES = {"sqlite": {"money": "text", "flag": "", "stamp": "text"},
             "postgresql": {"money": "numeric", "flag": "boolean", "stamp": "timestamptz"}}


def without_keys(url: str, *tables: str) -> None:
    """Replace the (empty) sample tables by the user's own kind: no primary key."""
    engine = db.engine_for(url)
    types = OWN_TYPES[engine.dialect.name]
    with engine.begin() as conn:
        for table in tables:
            conn.execute(text(f"DROP TABLE {table}"))
            conn.execute(text(f"CREATE TABLE {table} ({OWN_TABLES[table].format(**types)})"))


OPTIONAL = {"invoices": {"dunning_hold_until": "date"},
            "clients": {"dunning_paused_until": "date", "dunning_profile": "text"}}


def with_optional_columns(url: str) -> None:
    """The user's own tables (no primary key, tests/helpers/factories.py) with the optional
    columns of holds, pauses and profiles added (other tests read them without)."""
    engine = db.engine_for(url)
    with engine.begin() as conn:
        present = {(t, c) for t in OPTIONAL for c in db.read_frame(
            engine, f"SELECT * FROM {t} LIMIT 0", {}).columns}
        for table, columns in OPTIONAL.items():
            for column, kind in columns.items():
                if (table, column) not in present:
                    conn.execute(text(f"ALTER TABLE {table} ADD COLUMN {column} {kind}"))


def contract(cid: str, renewal: date | None, status: str = "active", **extra) -> dict:
    return {"id": cid, "vendor": f"Vendor {cid}", "title": "Service", "amount": "1250.50",
            "currency": "EUR", "renewal_date": renewal.isoformat() if renewal else None,
            "notify_email": f"{cid}@example.com", "status": status} | extra


def client(cid: str, locale: str = "en", paused: bool = False, **extra) -> dict:
    return {"id": cid, "name": f"Client {cid}", "email": f"{cid}@clients.example",
            "locale": locale, "notes": None, "dunning_paused": paused} | extra


def invoice(iid: str, client_id: str, sent_at: str | None, status: str = "sent", **extra) -> dict:
    return {"id": iid, "client_id": client_id, "number": f"F-{iid}", "amount": "980.40",
            "currency": "EUR", "status": status, "sent_at": sent_at, "due_date": "2027-02-28",
            "paid_at": None} | extra


def mark_paid(url: str, invoice_id: str, paid_at: str) -> None:
    with db.engine_for(url).begin() as conn:
        conn.execute(text("UPDATE invoices SET status = 'paid', paid_at = :p WHERE id = :id"),
                     {"p": paid_at, "id": invoice_id})
