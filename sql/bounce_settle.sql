-- The bounces of a row an operator settled no longer apply to it (a resend is a new delivery).
UPDATE dueflow_bounces SET settled_at = CURRENT_TIMESTAMP WHERE key = :key AND settled_at IS NULL
