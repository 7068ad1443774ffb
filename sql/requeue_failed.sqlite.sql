-- SQLite flavour of requeue_failed.postgresql.sql; SQLite runs one writer at a time, so
-- the requeue is atomic by construction.
UPDATE dueflow_ledger AS x
SET status = 'pending', sending_at = NULL, claim_token = NULL, flow_run_id = :flow_run_id,
    error = NULL, retry_after = NULL, updated_at = CURRENT_TIMESTAMP,
    attempts = CASE WHEN x.permanent THEN 0 ELSE x.attempts END, permanent = 0,
    previous_recipient = x.recipient, subject = NULL, body_text = NULL, body_html = NULL,
    statement_key = NULL
WHERE x.key IN (SELECT value FROM json_each(:keys)) AND x.status = 'failed'
RETURNING key
