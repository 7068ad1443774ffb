-- Reserve dunning steps: one statement for the whole night, fed with arrays.
-- Besides the PRIMARY KEY (G1), each candidate must still hold against the live rows:
--   * the invoice is still 'sent' and unpaid, its client not paused — an invoice
--     paid after extraction gets no reminder;
--   * the invoice's current step in the ledger is exactly the step before this one,
--     so two runs can never both advance it and a stale run can never skip a step;
--   * that previous step was reserved on or before :previous_by (as_of − delay).
-- The caller holds a transaction-scoped advisory lock for the job, so these checks
-- see every reservation committed before this statement.
-- created_at is this statement's start, after the lock was granted, so it orders
-- reservations as they were made; the column default, now(), is the transaction's
-- start, taken before the lock, which two racing runs may be granted in the other order.
INSERT INTO dueflow_ledger (key, job, subject_id, cycle, step, step_rank, recipient, as_of, flow_run_id,
                            status, created_at)
SELECT c.key, 'dunning', c.subject_id, c.cycle, c.step, c.step_rank, c.recipient,
       CAST(:as_of AS date), :flow_run_id, :status, statement_timestamp()
FROM unnest(CAST(:keys AS text[]), CAST(:subject_ids AS text[]), CAST(:cycles AS text[]),
            CAST(:steps AS text[]), CAST(:step_ranks AS integer[]), CAST(:recipients AS text[]),
            CAST(:previous_by AS date[]))
     AS c(key, subject_id, cycle, step, step_rank, recipient, previous_by)
-- EXISTS, not JOINs: the planner cannot estimate unnest's rows and chose a nested loop
-- over all clients per candidate (73 s for a 35k-invoice surge); these are PK lookups.
WHERE EXISTS (SELECT 1 FROM invoices i JOIN clients cl ON cl.id = i.client_id
              WHERE i.id = c.subject_id AND i.status = 'sent' AND i.paid_at IS NULL
                AND cl.dunning_paused IS NOT TRUE)
  AND COALESCE((SELECT MAX(l.step_rank) FROM dueflow_ledger l
                WHERE l.job = 'dunning' AND l.subject_id = c.subject_id), 0) = c.step_rank - 1
  AND (c.step_rank = 1 OR EXISTS (
        SELECT 1 FROM dueflow_ledger l
        WHERE l.job = 'dunning' AND l.subject_id = c.subject_id
          AND l.step_rank = c.step_rank - 1 AND l.as_of <= c.previous_by))
ON CONFLICT (key) DO NOTHING
RETURNING key
