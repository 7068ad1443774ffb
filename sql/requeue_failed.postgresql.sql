-- The failed rows a run retries go back to pending, unclaimed, without their message (it
-- is rendered again from the data as it is now and stored in the same transaction), in
-- one statement: two runs never requeue the same row (the second UPDATE waits for the
-- first, re-checks `status = 'failed'` and skips it). The address the failed message was
-- meant for is kept; a permanent failure retried to a new address starts counting again.
-- The attempt itself is counted when a delivery claims the row.
UPDATE dueflow_ledger AS x
SET status = 'pending', sending_at = NULL, claim_token = NULL, flow_run_id = :flow_run_id,
    error = NULL, retry_after = NULL, updated_at = CURRENT_TIMESTAMP,
    attempts = CASE WHEN x.permanent THEN 0 ELSE x.attempts END, permanent = false,
    previous_recipient = x.recipient, subject = NULL, body_text = NULL, body_html = NULL,
    statement_key = NULL
WHERE x.key = ANY(CAST(:keys AS text[])) AND x.status = 'failed'
RETURNING key
