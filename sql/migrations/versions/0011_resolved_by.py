"""Who settled a ledger row by hand, and when (issue 38): `dueflow resolve` records the
operator (`--by`, else the OS user) and the time on the row it settles — a pending row
said sent or failed, a bounced or failed one sent again (`--as retry`) — and both stay
after the retry that follows, when the row's error is cleared.

Revision ID: 0011
Revises: 0010
"""

from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("ALTER TABLE dueflow_ledger ADD COLUMN resolved_by text")
    op.execute("ALTER TABLE dueflow_ledger ADD COLUMN resolved_at timestamptz")

