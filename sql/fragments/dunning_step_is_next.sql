-- Step x is the next one of its invoice: the ledger's last step is exactly the one before
-- (two racing runs never both advance an invoice, a stale run never skips a step), and
-- that one is done — sent or adopted — on or before x.previous_by (the hold rule: no
-- step follows one that did not go out; a step is dated by the run that got it out).
-- Or x is the escalation and the ledger's last step is a reminder that bounced on or
-- before x.previous_by: the client could not be reached, so a person is told instead.
(COALESCE((SELECT MAX(m.step_rank) FROM dueflow_ledger m
           WHERE m.job = 'dunning' AND m.subject_id = x.subject_id), 0) = x.step_rank - 1
 AND (x.step_rank = 1 OR EXISTS (
       SELECT 1 FROM dueflow_ledger m
       WHERE m.job = 'dunning' AND m.subject_id = x.subject_id AND m.step_rank = x.step_rank - 1
         AND m.status IN ('sent', 'adopted') AND COALESCE(m.attempt_as_of, m.as_of) <= x.previous_by)))
OR (x.step = 'OVERDUE' AND EXISTS (
      SELECT 1 FROM dueflow_ledger m
      WHERE m.job = 'dunning' AND m.subject_id = x.subject_id AND m.status = 'bounced'
        AND m.step_rank < x.step_rank AND COALESCE(m.attempt_as_of, m.as_of) <= x.previous_by
        AND m.step_rank = (SELECT MAX(n.step_rank) FROM dueflow_ledger n
                           WHERE n.job = 'dunning' AND n.subject_id = x.subject_id)))
