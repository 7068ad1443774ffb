"""The ledger and the quarantine as the first versioned release made them.

Idempotent on purpose: a ledger created before the schema was versioned (by `CREATE TABLE
IF NOT EXISTS` and columns added in place) has no version row; this migration finds its
tables, adds the columns older releases lacked, and so brings it to this version with
every row kept.

Revision ID: 0001
Revises:
"""

from alembic import op
from sqlalchemy import inspect

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

LEDGER = """
CREATE TABLE IF NOT EXISTS dueflow_ledger (
    key            text PRIMARY KEY,
    job            text NOT NULL,
    subject_id     text NOT NULL,
    cycle          text NOT NULL,
    step           text NOT NULL,
    step_rank      integer NOT NULL,
    as_of          date NOT NULL,
    status         text NOT NULL DEFAULT 'pending'
                   CHECK (status IN ('pending', 'sent', 'failed', 'adopted')),
    attempts       integer NOT NULL DEFAULT 0,
    permanent      boolean NOT NULL DEFAULT false,
    retry_after    timestamptz,
    recipient      text,
    subject        text,
    body_text      text,
    body_html      text,
    message_id     text,
    draft_source   text,
    draft_note     text,
    smtp_response  text,
    error          text,
    flow_run_id    text,
    created_at     timestamptz NOT NULL DEFAULT CURRENT_TIMESTAMP,
    updated_at     timestamptz NOT NULL DEFAULT CURRENT_TIMESTAMP,
    sent_at        timestamptz,
    sending_at     timestamptz,
    claim_token    text,
    attempt_as_of  date
)
"""
# Columns added in place by releases before the schema was versioned.
ADDED = {"sending_at": "timestamptz", "claim_token": "text", "attempt_as_of": "date"}
INDEXES = (
    "CREATE INDEX IF NOT EXISTS dueflow_ledger_renewals ON dueflow_ledger (cycle, subject_id, step_rank)"
    " WHERE job = 'renewal'",
    "CREATE INDEX IF NOT EXISTS dueflow_ledger_dunning ON dueflow_ledger (subject_id, step_rank)"
    " WHERE job = 'dunning'",
    "DROP INDEX IF EXISTS dueflow_ledger_subject",
    "DROP INDEX IF EXISTS dueflow_ledger_cycles",
    "CREATE INDEX IF NOT EXISTS dueflow_ledger_open_keys ON dueflow_ledger (key)"
    " WHERE status IN ('pending', 'failed')",
)
QUARANTINE = """
CREATE TABLE IF NOT EXISTS dueflow_quarantine (
    job          text NOT NULL,
    source_id    text NOT NULL,
    reason       text NOT NULL,
    first_as_of  date NOT NULL,
    last_as_of   date NOT NULL,
    times_seen   integer NOT NULL DEFAULT 1,
    flow_run_id  text,
    PRIMARY KEY (job, source_id, reason)
)
"""


def upgrade() -> None:
    bind = op.get_bind()
    op.execute(LEDGER)
    schema = _current_schema(bind)
    have = {column["name"] for column in inspect(bind).get_columns("dueflow_ledger", schema=schema)}
    for name, kind in ADDED.items():
        if name not in have:
            op.execute(f"ALTER TABLE dueflow_ledger ADD COLUMN {name} {kind}")
    for ddl in INDEXES:
        if schema is not None and ddl.startswith("DROP INDEX"):  # PostgreSQL
            # Only dueflow's own schema: never an index of the same name elsewhere on the path.
            quoted = bind.dialect.identifier_preparer.quote_identifier(schema)
            ddl = ddl.replace("IF EXISTS ", f"IF EXISTS {quoted}.")
        op.execute(ddl)
    op.execute(QUARANTINE)


def _current_schema(bind) -> str | None:
    """Where the ledger is: the first schema of the search path (dueflow puts
    DUEFLOW_LEDGER_SCHEMA there); SQLite has one."""
    if bind.dialect.name != "postgresql":
        return None
    return bind.exec_driver_sql("SELECT current_schema()").scalar()
