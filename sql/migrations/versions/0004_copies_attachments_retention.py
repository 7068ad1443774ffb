"""Copies, the invoice itself, and retention (issue 29): the account manager's Cc and the
archive Bcc each email was sent to; the invoice PDF a reminder carries, named by its path,
the file name its reader sees, its size and its SHA-256 (stored before sending, G2), or
why it is not attached; and when a settled row's bodies and addresses were pruned
(`dueflow prune`), its key, status and dates kept for ever (G1).

Revision ID: 0004
Revises: 0003
"""

from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None

COLUMNS = {
    "cc_recipient": "text",
    "bcc_recipient": "text",
    "attachment_path": "text",
    "attachment_name": "text",
    "attachment_sha256": "text",
    "attachment_size": "bigint",
    "attachment_note": "text",
    "pruned_at": "timestamptz",
}


def upgrade() -> None:
    for name, kind in COLUMNS.items():
        op.execute(f"ALTER TABLE dueflow_ledger ADD COLUMN {name} {kind}")
