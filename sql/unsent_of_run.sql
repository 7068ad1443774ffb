-- Every pending row of one flow run that was never handed to SMTP, for `dueflow resolve
-- --never-handed-by RUN_ID`.
SELECT key FROM dueflow_ledger
WHERE status = 'pending' AND sending_at IS NULL AND flow_run_id = :run
ORDER BY key
