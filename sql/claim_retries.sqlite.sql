-- SQLite flavour of claim_retries.postgresql.sql (same conditions); SQLite runs
-- one writer at a time, so the claim is atomic by construction.
UPDATE dueflow_ledger
SET status = 'pending', attempts = attempts + 1, sending_at = NULL, flow_run_id = :flow_run_id,
    error = NULL, retry_after = NULL, updated_at = CURRENT_TIMESTAMP
WHERE status = 'failed' AND NOT permanent AND attempts < :max_attempts
  AND (retry_after IS NULL OR retry_after <= :now)
  AND body_text IS NOT NULL
  AND (
    (job = 'renewal'
     AND EXISTS (SELECT 1 FROM contracts c
                 WHERE c.id = dueflow_ledger.subject_id AND c.status = 'active'
                   AND date(c.renewal_date) = dueflow_ledger.cycle
                   AND date(c.renewal_date) >= :as_of)
     AND NOT EXISTS (SELECT 1 FROM dueflow_ledger m
                     WHERE m.job = 'renewal' AND m.subject_id = dueflow_ledger.subject_id
                       AND m.cycle = dueflow_ledger.cycle AND m.step_rank < dueflow_ledger.step_rank))
    OR
    (job = 'dunning'
     AND EXISTS (SELECT 1 FROM invoices i JOIN clients cl ON cl.id = i.client_id
                 WHERE i.id = dueflow_ledger.subject_id AND i.status = 'sent' AND i.paid_at IS NULL
                   AND lower(CAST(COALESCE(cl.dunning_paused, 0) AS text)) IN ('0', 'false', 'f', 'no'))
     AND NOT EXISTS (SELECT 1 FROM dueflow_ledger m
                     WHERE m.job = 'dunning' AND m.subject_id = dueflow_ledger.subject_id
                       AND m.step_rank > dueflow_ledger.step_rank)))
RETURNING key, job, recipient, subject, body_text, body_html, message_id
