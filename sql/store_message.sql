-- One message onto its reserved row (executemany: SQLite's store, and a retry's few rows on
-- both databases); the same rule as store_messages.postgresql.sql: the first message
-- stored on a row stays.
UPDATE dueflow_ledger
SET recipient = :recipient, subject = :subject, body_text = :body_text,
    body_html = :body_html, message_id = :message_id,
    draft_source = :draft_source, draft_note = :draft_note, paragraph = :paragraph,
    tone_plan = :tone_plan, refused_answer = :refused_answer,
    cc_recipient = :cc_recipient, bcc_recipient = :bcc_recipient,
    attachment_path = :attachment_path, attachment_name = :attachment_name,
    attachment_sha256 = :attachment_sha256, attachment_size = :attachment_size,
    attachment_note = :attachment_note, owed_state = :owed_state, statement_key = :statement_key,
    previous_recipient = NULLIF(previous_recipient, :recipient), updated_at = CURRENT_TIMESTAMP
WHERE key = :key AND status = 'pending' AND sending_at IS NULL AND body_text IS NULL
