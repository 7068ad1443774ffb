-- A reminder rendered again because what the client owes changed after it was stored
-- (docs/design.md, "What the client still owes"): its new message replaces the stored one
-- under the same key (the same Message-ID), only while the row is pending and no delivery
-- has claimed it — provably never handed to SMTP. A claimed row keeps its text (G3). A
-- statement is rendered again whole, and may be grouped anew (its carrier's invoice paid).
UPDATE dueflow_ledger
SET subject = :subject, body_text = :body_text, body_html = :body_html, message_id = :message_id,
    attachment_path = :attachment_path, attachment_name = :attachment_name,
    attachment_sha256 = :attachment_sha256, attachment_size = :attachment_size,
    attachment_note = :attachment_note, owed_state = :owed_state, statement_key = :statement_key,
    updated_at = CURRENT_TIMESTAMP
WHERE key = :key AND status = 'pending' AND sending_at IS NULL AND body_text IS NOT NULL
