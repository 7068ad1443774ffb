-- SQLite flavour of dunning_history_of.postgresql.sql.
SELECT l.subject_id, l.step, l.step_rank, l.as_of, l.attempt_as_of, l.status,
       CASE WHEN l.status = 'bounced' THEN l.error END AS bounce
FROM dueflow_ledger l
WHERE l.job = 'dunning' AND l.subject_id IN (SELECT value FROM json_each(:ids))
