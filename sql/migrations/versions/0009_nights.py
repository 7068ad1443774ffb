"""A night that looks wrong waits for a person (issue 40): each night's figures — emails
and amounts per job, the open invoices when read — are kept, so the next night can compare
itself with the recent ones (tasks/core/guard.py); and who approved a night that looked
wrong, when, and what they chose, is kept with it.

Revision ID: 0009
Revises: 0008
"""

from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("""
        CREATE TABLE IF NOT EXISTS dueflow_nights (
            as_of        date NOT NULL,
            flow_run_id  text NOT NULL DEFAULT '',
            figures      text NOT NULL,
            tripped      text,
            choice       text CHECK (choice IN ('send all', 'send up to', 'send none')),
            up_to        integer,
            approved_by  text,
            approved_at  timestamptz,
            recorded_at  timestamptz NOT NULL DEFAULT CURRENT_TIMESTAMP,
            PRIMARY KEY (as_of, flow_run_id)
        )""")
