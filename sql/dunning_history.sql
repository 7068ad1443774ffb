-- Every dunning step in the ledger for the invoices that may take part tonight: the current
-- step of an invoice is its highest step_rank, dated by the run that got it out
-- (attempt_as_of) or, while it is not out, by the run that reserved it (as_of); a bounced
-- step with its reason (the escalation says it).
SELECT l.subject_id, l.step, l.step_rank, l.as_of, l.attempt_as_of, l.status,
       CASE WHEN l.status = 'bounced' THEN l.error END AS bounce
FROM dueflow_ledger l
JOIN invoices i ON i.id = l.subject_id
WHERE l.job = 'dunning'
  AND i.paid_at IS NULL
  AND (i.status IS NULL OR i.status NOT IN ('draft', 'paid', 'void'))
