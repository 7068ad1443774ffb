"""The model chooses, reviewed sentences speak (issue 35, G7): a reminder's paragraph is a
plan — a tone and the ids of phrasebook sentences — kept on its row (`tone_plan`, with the
client as dueflow read it) beside the paragraph it rendered, and a model answer that was
refused is kept too (`refused_answer`, capped), its reason in `draft_note`. `draft_source`
says who chose: model, rule or template.

Rows of earlier releases whose paragraph a model wrote (`draft_source = 'llm'`) are never
sent with it: a pending row no delivery claimed (surely never handed to SMTP) loses its
stored message here and is rendered again, planned anew, by the next run; a failed row is
planned anew when it is retried (core.render.stored_drafts keeps no free text).

Revision ID: 0005
Revises: 0004
"""

from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None

WITHDRAW_FREE_TEXT = """
UPDATE dueflow_ledger
SET subject = NULL, body_text = NULL, body_html = NULL, paragraph = NULL,
    draft_note = 'free text of an earlier release withdrawn before sending (G7): planned again'
WHERE draft_source = 'llm' AND status = 'pending' AND sending_at IS NULL
"""


def upgrade() -> None:
    op.execute("ALTER TABLE dueflow_ledger ADD COLUMN tone_plan text")
    op.execute("ALTER TABLE dueflow_ledger ADD COLUMN refused_answer text")
    op.execute(WITHDRAW_FREE_TEXT)
