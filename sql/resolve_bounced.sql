-- An operator settles a bounced row: `failed` (the address is fixed: a later run sends it
-- again — a retry renders its message anew from the source rows as they are now and keeps
-- the address that bounced as previous_recipient; its attempts are counted anew) or `sent`
-- (it did reach the client after all).
-- The rows of a statement went as one email: the operator's word on one is the word on each.
UPDATE dueflow_ledger
SET status = :outcome, error = :note, permanent = false, retry_after = NULL,
    attempts = CASE WHEN :outcome = 'failed' THEN 0 ELSE attempts END,
    sending_at = NULL, claim_token = NULL, resolved_by = :by, resolved_at = CURRENT_TIMESTAMP,
    updated_at = CURRENT_TIMESTAMP
WHERE (key = :key OR statement_key = (SELECT s.statement_key FROM dueflow_ledger s WHERE s.key = :key))
  AND status = 'bounced'
