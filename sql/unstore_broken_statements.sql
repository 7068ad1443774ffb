-- A statement never handed to SMTP that lost one of its rows before it went (its invoice was
-- paid or put on hold: sql/withdraw_unsent settled that row `failed`) is not sent as stored:
-- it would list an invoice the client no longer owes. Its other rows lose the stored message
-- and are rendered again, as a statement of what is still due, under the same keys
-- (docs/design.md, "Statements"). A row handed to SMTP is never touched.
UPDATE dueflow_ledger
SET subject = NULL, body_text = NULL, body_html = NULL, message_id = NULL, statement_key = NULL,
    updated_at = CURRENT_TIMESTAMP
WHERE status = 'pending' AND sending_at IS NULL AND statement_key IS NOT NULL
  AND statement_key IN (SELECT o.statement_key FROM dueflow_ledger o
                        WHERE o.statement_key IS NOT NULL
                          AND NOT (o.status = 'pending' AND o.sending_at IS NULL))
