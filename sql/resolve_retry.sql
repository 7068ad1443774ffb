-- An operator sends a failed or bounced row once more (`dueflow resolve KEY --as retry`),
-- after fixing the mailbox behind the same address: a permanent refusal, a row out of
-- attempts, or a bounce. The row becomes an ordinary failed row due for its first attempt
-- (no retry_after, attempts 0, not permanent), so the next run's sql/retry_candidates
-- takes it and sql/requeue_failed moves it to pending in one statement — one run wins
-- it, its message is rendered anew and stored before it is sent (G1-G3). Who and when stay
-- on the row (resolved_by, resolved_at). The rows of a statement went as one email: all of
-- them go again (rendered anew, grouped again).
UPDATE dueflow_ledger
SET status = 'failed', error = :note, permanent = false, retry_after = NULL, attempts = 0,
    sending_at = NULL, claim_token = NULL, resolved_by = :by, resolved_at = CURRENT_TIMESTAMP,
    updated_at = CURRENT_TIMESTAMP
WHERE (key = :key OR statement_key = (SELECT s.statement_key FROM dueflow_ledger s WHERE s.key = :key))
  AND status IN ('failed', 'bounced')
