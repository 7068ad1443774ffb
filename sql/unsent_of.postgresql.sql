-- sql/unsent, for these keys only: a chunk of tonight's rows about to be delivered (the
-- restate-owed step), read by key instead of every unclaimed row of the ledger.
SELECT key, job, subject_id, cycle, step, step_rank, as_of, recipient, paragraph, draft_source,
       draft_note, tone_plan, owed_state, statement_key,
       CASE WHEN body_text IS NULL THEN 0 ELSE 1 END AS stored
FROM dueflow_ledger
WHERE key = ANY(CAST(:keys AS text[])) AND status = 'pending' AND sending_at IS NULL
ORDER BY key
