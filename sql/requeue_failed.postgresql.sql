-- Failed rows due for another attempt (G4) go back to pending, unclaimed, in one statement:
-- two runs never requeue the same row (the second UPDATE waits for the first, re-checks
-- `status = 'failed'` and skips it). Only rows still meant to go out; never `pending` ones.
-- The attempt itself is counted when a delivery claims the row.
UPDATE dueflow_ledger AS x
SET status = 'pending', sending_at = NULL, claim_token = NULL, flow_run_id = :flow_run_id,
    error = NULL, retry_after = NULL, updated_at = CURRENT_TIMESTAMP
WHERE x.status = 'failed' AND NOT x.permanent AND x.attempts < :max_attempts
  AND (x.retry_after IS NULL OR x.retry_after <= CAST(:now AS timestamptz))
  AND (/*include still_due*/)
RETURNING key
