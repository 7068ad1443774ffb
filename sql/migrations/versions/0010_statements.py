"""One statement per client (issue 40): several reminders of one client's invoices may go
as one email. Each invoice step keeps its own ledger row and key (G1); the rows of one
statement store the same message and name the statement by its carrier's key
(`statement_key`: the smallest key of the statement, the row whose claim sends it). A row
without one is an email of its own.

Revision ID: 0010
Revises: 0009
"""

from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("ALTER TABLE dueflow_ledger ADD COLUMN statement_key text")
    op.execute("CREATE INDEX IF NOT EXISTS dueflow_ledger_statement ON dueflow_ledger (statement_key)"
               " WHERE statement_key IS NOT NULL")
