-- The quarantine table for `dueflow quarantine`, optionally of one job, latest first.
SELECT job, source_id, reason, first_as_of, last_as_of, times_seen, flow_run_id
FROM dueflow_quarantine
WHERE :job IS NULL OR job = :job
ORDER BY last_as_of DESC, job, source_id, reason
