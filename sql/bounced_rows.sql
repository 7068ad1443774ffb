-- Bounced rows of the whole ledger, oldest first, for every run's "Needs attention".
SELECT key, job, recipient, error FROM dueflow_ledger
WHERE status = 'bounced'
ORDER BY updated_at, key
LIMIT :limit
