-- SQLite flavour of claim_sending.postgresql.sql (same conditions).
UPDATE dueflow_ledger
SET sending_at = CURRENT_TIMESTAMP, attempt_as_of = :as_of,
    attempts = attempts + CASE WHEN claim_token = :token THEN 0 ELSE 1 END,
    claim_token = :token, updated_at = CURRENT_TIMESTAMP
WHERE ((key IN (SELECT value FROM json_each(:keys)) AND (statement_key IS NULL OR statement_key = key))
       OR statement_key IN (SELECT value FROM json_each(:keys)))
  AND status = 'pending' AND body_text IS NOT NULL
  AND (sending_at IS NULL OR claim_token = :token)
RETURNING key, recipient, subject, body_text, body_html, message_id, cc_recipient, bcc_recipient,
          attachment_path, attachment_name, attachment_sha256, attachment_size, statement_key
