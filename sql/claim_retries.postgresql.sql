-- Claim failed rows for one more attempt (G4), in one statement, so that two runs
-- never retry the same row: under concurrency the second UPDATE waits for the
-- first, re-checks `status = 'failed'` on the new row version and skips it.
-- Only rows that surely were not sent are `failed`; `pending` is never claimed.
-- A row is retried only while it is still meant to go out: the contract still
-- renews on that date and no more urgent lead followed; the invoice is still
-- unpaid, still 'sent', its client not paused, and no later step followed.
UPDATE dueflow_ledger
SET status = 'pending', attempts = attempts + 1, sending_at = NULL, flow_run_id = :flow_run_id,
    error = NULL, retry_after = NULL, updated_at = CURRENT_TIMESTAMP
WHERE status = 'failed' AND NOT permanent AND attempts < :max_attempts
  AND (retry_after IS NULL OR retry_after <= CAST(:now AS timestamptz))
  AND body_text IS NOT NULL
  AND (
    (job = 'renewal'
     AND EXISTS (SELECT 1 FROM contracts c
                 WHERE c.id = dueflow_ledger.subject_id AND c.status = 'active'
                   AND CAST(c.renewal_date AS text) = dueflow_ledger.cycle
                   AND c.renewal_date >= CAST(:as_of AS date))
     AND NOT EXISTS (SELECT 1 FROM dueflow_ledger m
                     WHERE m.job = 'renewal' AND m.subject_id = dueflow_ledger.subject_id
                       AND m.cycle = dueflow_ledger.cycle AND m.step_rank < dueflow_ledger.step_rank))
    OR
    (job = 'dunning'
     AND EXISTS (SELECT 1 FROM invoices i JOIN clients cl ON cl.id = i.client_id
                 WHERE i.id = dueflow_ledger.subject_id AND i.status = 'sent'
                   AND i.paid_at IS NULL AND cl.dunning_paused IS NOT TRUE)
     AND NOT EXISTS (SELECT 1 FROM dueflow_ledger m
                     WHERE m.job = 'dunning' AND m.subject_id = dueflow_ledger.subject_id
                       AND m.step_rank > dueflow_ledger.step_rank)))
RETURNING key, job, recipient, subject, body_text, body_html, message_id
