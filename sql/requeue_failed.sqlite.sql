-- SQLite flavour of requeue_failed.postgresql.sql (the same fragments); SQLite runs one
-- writer at a time, so the requeue is atomic by construction.
UPDATE dueflow_ledger AS x
SET status = 'pending', sending_at = NULL, claim_token = NULL, flow_run_id = :flow_run_id,
    error = NULL, retry_after = NULL, updated_at = CURRENT_TIMESTAMP
WHERE x.status = 'failed' AND NOT x.permanent AND x.attempts < :max_attempts
  AND (x.retry_after IS NULL OR x.retry_after <= :now)
  AND (/*include still_due*/)
RETURNING key
