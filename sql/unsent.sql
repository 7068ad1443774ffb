-- Pending rows that no delivery has claimed: surely never handed to SMTP (G3), so a run
-- sends them without anyone's help — rows whose run died before sending, requeued
-- failures, rows an operator settled as failed. `stored`: the message is on the row;
-- `owed_state`: what the amount it states was read from (a reminder's); `statement_key`: in a
-- statement, its carrier's key — the other rows of a statement go with their carrier
-- (sql/claim_sending), never alone.
SELECT key, job, subject_id, cycle, step, step_rank, as_of, recipient, paragraph, draft_source,
       draft_note, tone_plan, owed_state, statement_key,
       CASE WHEN body_text IS NULL THEN 0 ELSE 1 END AS stored
FROM dueflow_ledger
WHERE status = 'pending' AND sending_at IS NULL
ORDER BY key
