"""A retry goes where the data now says (issue 25): the drafted paragraph is kept on its
row, so that a message rendered again for a retry keeps what the model wrote (G7), and the
address a failed message was meant for is kept beside the one it is retried to.

Revision ID: 0002
Revises: 0001
"""

from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("ALTER TABLE dueflow_ledger ADD COLUMN paragraph text")
    op.execute("ALTER TABLE dueflow_ledger ADD COLUMN previous_recipient text")
