"""Bounces nobody can forge (issue 36, case 3): a Message-ID was sha256(key), derivable by
anyone who knows an invoice id (any client reads ids in its own email's headers), and a
report built from one marked a delivered reminder bounced. Each database now holds a
secret, made here once with the operating system's random source and never printed
(`dueflow_secrets`, name 'message_id'): new Message-IDs are HMAC-SHA256(secret, key), so
a report can only name a row of an email it saw. Every worker of the database reads the
same secret, so a message rendered again has the same Message-ID.

Revision ID: 0007
Revises: 0006
"""

import secrets

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("CREATE TABLE IF NOT EXISTS dueflow_secrets (name text PRIMARY KEY, value text NOT NULL)")
    op.get_bind().execute(sa.text("INSERT INTO dueflow_secrets (name, value) VALUES ('message_id', :value)"),
                          {"value": secrets.token_hex(32)})
