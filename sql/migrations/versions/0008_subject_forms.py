"""Keys that survive the company's changes (issue 36, case 2): a view's ids recreated as
another type or spelling (`1` read as `1.00`, a uuid in capitals, `0001`) made new keys
for the same invoices, and the next night sent their first reminder again. Each ledger row
now keeps its subject's form apart from its spelling (`subject_form`,
tasks/core/keys.py `id_forms`), indexed per job, so that a night whose new rows have the
form of ids the ledger knows by another spelling stops before anything is written
(tasks/core/rekeying.py); `dueflow rekey` moves their history to the new spelling, or
keeps them apart, and `dueflow_id_changes` records who decided what.

Revision ID: 0008
Revises: 0007
"""

import sqlalchemy as sa
from alembic import op

from dueflow.tasks.core.frames import pd
from dueflow.tasks.core.keys import id_forms

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None

BATCH = 10_000


def upgrade() -> None:
    op.execute("ALTER TABLE dueflow_ledger ADD COLUMN subject_form text")
    bind = op.get_bind()
    for job in ("renewal", "dunning"):
        ids = [row[0] for row in bind.execute(
            sa.text("SELECT DISTINCT subject_id FROM dueflow_ledger WHERE job = :job"), {"job": job})]
        for start in range(0, len(ids), BATCH):
            chunk = pd.Series(ids[start:start + BATCH], dtype="string")
            bind.execute(
                sa.text("UPDATE dueflow_ledger SET subject_form = :form"
                        " WHERE job = :job AND subject_id = :id"),
                [{"form": form, "job": job, "id": subject_id}
                 for subject_id, form in zip(chunk, id_forms(chunk), strict=True)])
    op.execute("CREATE INDEX IF NOT EXISTS dueflow_ledger_subject_forms"
               " ON dueflow_ledger (job, subject_form)")
    op.execute("""
        CREATE TABLE IF NOT EXISTS dueflow_id_changes (
            job         text NOT NULL,
            old_id      text NOT NULL,
            new_id      text NOT NULL,
            decision    text NOT NULL CHECK (decision IN ('same', 'apart')),
            rows_moved  integer NOT NULL DEFAULT 0,
            decided_by  text,
            decided_at  timestamptz NOT NULL DEFAULT CURRENT_TIMESTAMP,
            PRIMARY KEY (job, old_id, new_id)
        )""")
