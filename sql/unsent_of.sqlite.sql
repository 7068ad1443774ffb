-- SQLite flavour of unsent_of.postgresql.sql.
SELECT key, job, subject_id, cycle, step, step_rank, as_of, recipient, paragraph, draft_source,
       draft_note, tone_plan, owed_state, statement_key,
       CASE WHEN body_text IS NULL THEN 0 ELSE 1 END AS stored
FROM dueflow_ledger
WHERE key IN (SELECT value FROM json_each(:keys)) AND status = 'pending' AND sending_at IS NULL
ORDER BY key
