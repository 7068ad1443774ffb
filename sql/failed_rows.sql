-- The ledger's failed rows, with why a night may not retry them: refused for good
-- (permanent), out of attempts, or waiting for retry_after — what the summary says of a due
-- key that "failed earlier" (few rows, as open_keys).
SELECT key, permanent, attempts, retry_after, error FROM dueflow_ledger WHERE status = 'failed' ORDER BY key
