-- `dueflow demo`'s story: reminders that finance handled before dueflow took over, recorded
-- as 'adopted' (handled, never sent by dueflow), unless already there.
INSERT INTO dueflow_ledger (key, job, subject_id, cycle, step, step_rank, as_of, status, attempt_as_of)
VALUES (:key, 'dunning', :subject_id, '', :step, :step_rank, :as_of, 'adopted', :as_of)
ON CONFLICT (key) DO NOTHING
