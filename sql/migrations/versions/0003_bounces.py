"""Bounce intake (docs/bounces.md): the ledger status `bounced`, the delivery status
notifications matched to ledger rows (`dueflow_bounces`), and the ones kept aside because
they match no row or cannot be read (`dueflow_bounce_kept`).

The ledger's status CHECK gains `bounced`: PostgreSQL swaps the constraint; SQLite cannot
alter a CHECK, so the table is rebuilt from its own CREATE statement (every column, row and
index kept) in dueflow's transaction.

Revision ID: 0003
Revises: 0002
"""

import re

from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None

STATUSES = "('pending', 'sent', 'failed', 'adopted', 'bounced')"
_OLD_CHECK = re.compile(r"status\s+IN\s*\([^)]*\)", re.IGNORECASE)

BOUNCES = """
CREATE TABLE IF NOT EXISTS dueflow_bounces (
    report_id    text PRIMARY KEY,
    key          text NOT NULL,
    message_id   text NOT NULL,
    kind         text NOT NULL CHECK (kind IN ('hard', 'soft')),
    status_code  text,
    diagnostic   text,
    recipient    text,
    seen_at      timestamptz NOT NULL,
    source       text NOT NULL,
    recorded_at  timestamptz NOT NULL DEFAULT CURRENT_TIMESTAMP,
    settled_at   timestamptz
)
"""
KEPT = """
CREATE TABLE IF NOT EXISTS dueflow_bounce_kept (
    report_id    text PRIMARY KEY,
    reason       text NOT NULL,
    detail       text,
    message_id   text,
    key          text,
    seen_at      timestamptz,
    source       text NOT NULL,
    recorded_at  timestamptz NOT NULL DEFAULT CURRENT_TIMESTAMP
)
"""
INDEXES = ("CREATE INDEX IF NOT EXISTS dueflow_bounces_key ON dueflow_bounces (key)",)


def upgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name == "postgresql":
        _postgresql_check(bind)
    else:
        _sqlite_check(bind)
    op.execute(BOUNCES)
    op.execute(KEPT)
    for ddl in INDEXES:
        op.execute(ddl)


def _postgresql_check(bind) -> None:
    # The status CHECK of the ledger in dueflow's own schema, whatever it was named.
    names = bind.exec_driver_sql(
        "SELECT c.conname FROM pg_constraint c JOIN pg_class t ON t.oid = c.conrelid"
        # By name, not current_schema()::regnamespace: that parses the name as SQL, and a
        # schema named with capitals, a space or a quote is then not found.
        " WHERE t.relname = 'dueflow_ledger'"
        " AND t.relnamespace = (SELECT oid FROM pg_namespace WHERE nspname = current_schema())"
        " AND c.contype = 'c' AND position('status' in pg_get_constraintdef(c.oid)) > 0").scalars().all()
    for name in names:
        quoted = bind.dialect.identifier_preparer.quote_identifier(name)
        op.execute(f"ALTER TABLE dueflow_ledger DROP CONSTRAINT {quoted}")
    op.execute(f"ALTER TABLE dueflow_ledger ADD CONSTRAINT dueflow_ledger_status_check"
               f" CHECK (status IN {STATUSES})")


def _sqlite_check(bind) -> None:
    create = bind.exec_driver_sql(
        "SELECT sql FROM sqlite_master WHERE type = 'table' AND name = 'dueflow_ledger'").scalar()
    if "'bounced'" in create:
        return
    indexes = bind.exec_driver_sql(
        "SELECT sql FROM sqlite_master WHERE type = 'index' AND tbl_name = 'dueflow_ledger'"
        " AND sql IS NOT NULL").scalars().all()
    columns = [row[1] for row in bind.exec_driver_sql("PRAGMA table_info(dueflow_ledger)")]
    rebuilt = _OLD_CHECK.sub(f"status IN {STATUSES}", create, count=1)
    rebuilt = re.sub(r"^\s*CREATE TABLE\s+(IF NOT EXISTS\s+)?\"?dueflow_ledger\"?",
                     "CREATE TABLE dueflow_ledger_0003", rebuilt, count=1, flags=re.IGNORECASE)
    listed = ", ".join(f'"{c}"' for c in columns)
    op.execute(rebuilt)
    op.execute(f"INSERT INTO dueflow_ledger_0003 ({listed}) SELECT {listed} FROM dueflow_ledger")
    op.execute("DROP TABLE dueflow_ledger")
    op.execute("ALTER TABLE dueflow_ledger_0003 RENAME TO dueflow_ledger")
    for ddl in indexes:
        op.execute(ddl)
