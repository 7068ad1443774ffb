-- sql/dunning_history for the invoices of sql/dunning_candidates only (their ids), with a
-- bounced step's reason (the escalation says it).
SELECT l.subject_id, l.step, l.step_rank, l.as_of, l.attempt_as_of, l.status,
       CASE WHEN l.status = 'bounced' THEN l.error END AS bounce
FROM dueflow_ledger l
WHERE l.job = 'dunning' AND l.subject_id = ANY(CAST(:ids AS text[]))
