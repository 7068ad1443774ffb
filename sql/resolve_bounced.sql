-- An operator settles a bounced row: `failed` (the address is fixed: a later run sends it
-- again, its message rendered anew from the source rows as they are now, for the address
-- that bounced is in the stored one) or `sent` (it did reach the client after all).
UPDATE dueflow_ledger
SET status = :outcome, error = :note, permanent = false, retry_after = NULL,
    recipient = CASE WHEN :outcome = 'failed' THEN NULL ELSE recipient END,
    subject = CASE WHEN :outcome = 'failed' THEN NULL ELSE subject END,
    body_text = CASE WHEN :outcome = 'failed' THEN NULL ELSE body_text END,
    body_html = CASE WHEN :outcome = 'failed' THEN NULL ELSE body_html END,
    sending_at = NULL, claim_token = NULL, updated_at = CURRENT_TIMESTAMP
WHERE key = :key AND status = 'bounced'
