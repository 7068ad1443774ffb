-- SQLite flavour of ledger_states.postgresql.sql.
SELECT key, status, sending_at FROM dueflow_ledger WHERE key IN (SELECT value FROM json_each(:keys))
