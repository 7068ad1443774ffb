"""A bounce of a copy stays a copy's after retention (issue 36, case 4): `dueflow prune`
removes a settled row's addresses, and a late report for its Cc or Bcc then looked like
the recipient's and marked the row bounced. Prune now keeps `copy_digests`: the SHA-256 of
each copy address that was sent apart from the recipient (never the address itself), which
is all bounce intake needs to recognise a copy's report.

Revision ID: 0006
Revises: 0005
"""

from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("ALTER TABLE dueflow_ledger ADD COLUMN copy_digests text")
