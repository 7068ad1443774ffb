-- Pending rows that no delivery has claimed: surely never handed to SMTP (G3), so a run
-- sends them without anyone's help — rows whose run died before sending, requeued
-- failures, rows an operator settled as failed. `stored`: the message is on the row. The
-- other rows of a statement go with its carrier (sql/claim_sending), never alone.
SELECT key, job, subject_id, cycle, step, step_rank, as_of, recipient, paragraph, draft_source,
       draft_note, tone_plan,
       CASE WHEN body_text IS NULL THEN 0 ELSE 1 END AS stored
FROM dueflow_ledger
WHERE status = 'pending' AND sending_at IS NULL AND (statement_key IS NULL OR statement_key = key)
ORDER BY key
