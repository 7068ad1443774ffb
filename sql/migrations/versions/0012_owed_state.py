"""What the client still owed when a reminder was rendered (issue 43): a stored body states
an amount; `owed_state` keeps what that amount was read from (sql/fragments/payment_state),
so that a payment recorded before the row is claimed for sending is noticed and the message
rendered again under the same key (docs/design.md, "What the client still owes").

Revision ID: 0012
Revises: 0011
"""

from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("ALTER TABLE dueflow_ledger ADD COLUMN owed_state text")


def downgrade() -> None:
    op.execute("ALTER TABLE dueflow_ledger DROP COLUMN owed_state")
