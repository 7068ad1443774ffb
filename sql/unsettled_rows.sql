-- The oldest pending and failed rows of the whole ledger, for a run's report.
SELECT key, status, attempts, permanent, error, sending_at FROM dueflow_ledger
WHERE status IN ('pending', 'failed')
ORDER BY created_at, key
LIMIT :limit
