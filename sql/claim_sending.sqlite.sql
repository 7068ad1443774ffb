-- A delivery batch claims its rows just before sending (G1 when a task is re-run):
-- only pending rows of the current attempt that no batch claimed yet. A second
-- execution of the same batch finds them claimed and sends nothing.
UPDATE dueflow_ledger
SET sending_at = CURRENT_TIMESTAMP
WHERE key IN (SELECT value FROM json_each(:keys)) AND status = 'pending' AND sending_at IS NULL
RETURNING key
