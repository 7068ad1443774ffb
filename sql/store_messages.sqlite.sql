-- Write a rendered message onto the row this run reserved, before it is sent (G2).
-- Only 'pending' rows are touched: a row settled meanwhile keeps what was sent.
UPDATE dueflow_ledger
SET recipient = :recipient, subject = :subject, body_text = :body_text,
    body_html = :body_html, message_id = :message_id,
    draft_source = :draft_source, draft_note = :draft_note,
    attempts = attempts + 1, updated_at = CURRENT_TIMESTAMP
WHERE key = :key AND status = 'pending'
