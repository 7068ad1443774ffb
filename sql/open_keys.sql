-- Every key of the ledger that is not settled (few, and read through the open-keys index).
SELECT key, status FROM dueflow_ledger WHERE status IN ('pending', 'failed')
