-- The bounces of a row an operator settled no longer apply to it (a resend is a new delivery);
-- a statement's are recorded on its carrier's key.
UPDATE dueflow_bounces SET settled_at = CURRENT_TIMESTAMP
WHERE (key = :key OR key = (SELECT l.statement_key FROM dueflow_ledger l WHERE l.key = :key))
  AND settled_at IS NULL
