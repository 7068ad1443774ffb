"""A company's own tables, shaped as issue 38 found them: `customer`, `invoice` and
`agreement`, integer and bigint ids, a boolean state, amounts in cents, their own column
names and status words — on PostgreSQL (in the test's schema) or SQLite (its declared types:
booleans as 0/1). Dates are counted from a night, AS_OF unless given (`dueflow check` reads
today's)."""

from __future__ import annotations

from datetime import date, timedelta

from sqlalchemy import text

from dueflow.tasks.adapters import db

AS_OF = date(2027, 3, 10)


def day(offset: int, night: date = AS_OF) -> str:
    return (night + timedelta(days=offset)).isoformat()


# The hand-written mapping a person would write for these tables (issue 38's, once value
# maps apply to a boolean and notes is optional): what `dueflow sources init` should draft.
MAPPING = """
[contracts]
relation = "agreement"
[contracts.columns]
id = "agreement_id"
vendor = "supplier"
title = "description"
amount_minor = "fee_cents"
renewal_date = "renews_on"
notify_email = "owner_email"
status = "active"
[contracts.values.status]
true = "active"
false = "cancelled"
[clients]
relation = "customer"
[clients.columns]
id = "customer_id"
name = "customer_name"
email = "billing_email"
locale = "language"
dunning_paused = "on_hold"
cc_email = "account_manager"
[invoices]
relation = "invoice"
[invoices.columns]
id = "invoice_id"
client_id = "customer_id"
number = "invoice_no"
amount_minor = "total_cents"
status = "state"
sent_at = "issued_at"
due_date = "due_on"
paid_at = "paid_on"
[invoices.values.status]
issued = "sent"
settled = "paid"
cancelled = "void"
"""

# What a night on AS_OF sends: by dunning start. With `sent`, two first reminders go before
# their invoice's due date (9000000001, 9000000003); the paused client's invoice waits.
def renewals(night: date = AS_OF) -> set[str]:
    return {f"renewal/1/{day(30, night)}/30d", f"renewal/3/{day(60, night)}/60d"}  # 2 is not active


RENEWALS = renewals()
DUE_BY_START = {
    "sent": {f"dunning/{n}/REMINDED_1" for n in (9000000001, 9000000002, 9000000003)},
    "due": {"dunning/9000000002/REMINDED_1"},
}
BEFORE_DUE = 2  # of the reminders due with `sent`: 9000000001 and 9000000003


def create_company(url: str, due_on_type: str = "date", night: date = AS_OF) -> None:
    """The three tables and their rows (`due_on_type`: text, to try a date kept as text),
    dated from `night`."""
    engine = db.engine_for(url)
    pg = engine.dialect.name == "postgresql"
    flag = "boolean" if pg else "BOOLEAN"
    stamp = "timestamptz" if pg else "TIMESTAMP"
    with engine.begin() as conn:
        for ddl in (
            f"CREATE TABLE customer (customer_id integer PRIMARY KEY, customer_name text NOT NULL,"
            f" billing_email text, language char(2), on_hold {flag} NOT NULL, account_manager text)",
            f"CREATE TABLE invoice (invoice_id bigint PRIMARY KEY, customer_id integer, invoice_no text,"
            f" total_cents bigint, currency char(3), state text, issued_at {stamp}, due_on {due_on_type},"
            f" paid_on date)",
            f"CREATE TABLE agreement (agreement_id integer PRIMARY KEY, supplier text, description text,"
            f" fee_cents bigint, currency char(3), renews_on date, owner_email text, active {flag})",
        ):
            conn.execute(text(ddl))
        conn.execute(text("INSERT INTO customer VALUES (:id, :name, :email, :lang, :hold, :kam)"), [
            {"id": 1, "name": "Acme Tools", "email": "ap@acme.example", "lang": "en", "hold": False,
             "kam": "kam@ours.example"},
            {"id": 2, "name": "Bodega Sol", "email": "pagos@bodega.example", "lang": "es", "hold": False,
             "kam": None},
            {"id": 3, "name": "Held GmbH", "email": "buchhaltung@held.example", "lang": "de", "hold": True,
             "kam": None}])
        conn.execute(text("INSERT INTO invoice VALUES (:id, :client, :no, :cents, 'EUR', :state, :issued,"
                          " :due, :paid)"), [
            {"id": 9000000001, "client": 1, "no": "INV-1001", "cents": 125000, "state": "issued",
             "issued": f"{day(-8, night)}T09:00:00+00:00", "due": day(22, night), "paid": None},
            {"id": 9000000002, "client": 1, "no": "INV-1002", "cents": 98040, "state": "issued",
             "issued": f"{day(-40, night)}T09:00:00+00:00", "due": day(-10, night), "paid": None},
            {"id": 9000000003, "client": 2, "no": "INV-1003", "cents": 45000, "state": "issued",
             "issued": f"{day(-9, night)}T09:00:00+00:00", "due": day(6, night), "paid": None},
            {"id": 9000000004, "client": 2, "no": "INV-1004", "cents": 12000, "state": "settled",
             "issued": f"{day(-30, night)}T09:00:00+00:00", "due": day(0, night), "paid": day(-2, night)},
            {"id": 9000000005, "client": 3, "no": "INV-1005", "cents": 77000, "state": "issued",
             "issued": f"{day(-20, night)}T09:00:00+00:00", "due": day(-5, night), "paid": None}])
        conn.execute(text("INSERT INTO agreement VALUES (:id, :supplier, :what, :cents, :cur, :renews,"
                          " :owner, :active)"), [
            {"id": 1, "supplier": "CloudCo", "what": "Hosting", "cents": 1200000, "cur": "EUR",
             "renews": day(30, night), "owner": "it@ours.example", "active": True},
            {"id": 2, "supplier": "PrintCo", "what": "Printers", "cents": 50000, "cur": "EUR",
             "renews": day(15, night), "owner": "office@ours.example", "active": False},
            {"id": 3, "supplier": "DataCo", "what": "Analytics", "cents": 990000, "cur": "USD",
             "renews": day(60, night), "owner": "data@ours.example", "active": True}])


def schema_of(url: str) -> str | None:
    """The schema the test's PostgreSQL URL puts first on the search path (None: SQLite)."""
    engine = db.engine_for(url)
    if engine.dialect.name != "postgresql":
        return None
    with engine.connect() as conn:
        return conn.exec_driver_sql("SELECT current_schema()").scalar()
