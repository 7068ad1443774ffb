-- One invoice's dunning steps, for `dueflow invoices --id`: each dated by the run that
-- got it out (or reserved it, while it is not out), its copy, its invoice PDF, and when
-- retention pruned its addresses and bodies.
SELECT key, step, COALESCE(attempt_as_of, as_of) AS as_of, status, attempts, recipient, error,
       cc_recipient, attachment_name, attachment_sha256, attachment_size, attachment_note, pruned_at
FROM dueflow_ledger
WHERE job = 'dunning' AND subject_id = :id
ORDER BY step_rank
