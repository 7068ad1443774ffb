-- The status and claim of these keys: a pending row with a claim may have left; without
-- one it was surely never handed to SMTP.
SELECT key, status, sending_at FROM dueflow_ledger WHERE key = ANY(CAST(:keys AS text[]))
