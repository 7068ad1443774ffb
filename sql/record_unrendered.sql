-- A reserved row whose message could not be rendered: known not sent, `failed` with the
-- reason; the attempt counts, so the bounded retry policy stops a row that never renders.
UPDATE dueflow_ledger
SET status = 'failed', error = :error, attempts = attempts + 1, permanent = false,
    retry_after = NULL, updated_at = CURRENT_TIMESTAMP
WHERE key = :key AND status = 'pending' AND sending_at IS NULL
