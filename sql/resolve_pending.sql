-- An operator settles a pending row: `sent` (it was delivered; only a row that was handed
-- to SMTP can have been) or `failed` (it was not: a later run sends it again, however many
-- attempts it took before: the operator's word starts the count again).
-- The rows of a statement went as one email: the operator's word on one is the word on each.
UPDATE dueflow_ledger
SET status = :outcome, error = :note, permanent = false, retry_after = NULL,
    attempts = CASE WHEN :outcome = 'failed' THEN 0 ELSE attempts END,
    sent_at = CASE WHEN :outcome = 'sent' THEN CURRENT_TIMESTAMP ELSE sent_at END,
    resolved_by = :by, resolved_at = CURRENT_TIMESTAMP, updated_at = CURRENT_TIMESTAMP
WHERE (key = :key OR statement_key = (SELECT s.statement_key FROM dueflow_ledger s WHERE s.key = :key))
  AND status = 'pending' AND (:outcome = 'failed' OR sending_at IS NOT NULL)
