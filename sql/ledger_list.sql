-- Ledger rows for `dueflow ledger`, optionally of one status, oldest first.
SELECT key, status, as_of, attempts, recipient, subject, error, smtp_response, flow_run_id,
       created_at, updated_at, sending_at, sent_at
FROM dueflow_ledger
WHERE :status IS NULL OR status = :status
ORDER BY created_at, key
