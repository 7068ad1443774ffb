-- One invoice's dunning steps, for `dueflow invoices --id`: each dated by the run that
-- got it out (or reserved it, while it is not out).
SELECT key, step, COALESCE(attempt_as_of, as_of) AS as_of, status, attempts, recipient, error
FROM dueflow_ledger
WHERE job = 'dunning' AND subject_id = :id
ORDER BY step_rank
