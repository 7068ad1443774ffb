-- SQLite flavour of reserve_dunning.postgresql.sql (same checks). The candidates
-- were loaded into the temporary table `candidate` in the same BEGIN IMMEDIATE
-- transaction, which serialises this statement against every other writer.
INSERT INTO dueflow_ledger (key, job, subject_id, cycle, step, step_rank, recipient, as_of, flow_run_id,
                            status)
SELECT c.key, 'dunning', c.subject_id, c.cycle, c.step, c.step_rank, c.recipient,
       :as_of, :flow_run_id, :status
FROM candidate c
WHERE EXISTS (SELECT 1 FROM invoices i JOIN clients cl ON cl.id = i.client_id
              WHERE i.id = c.subject_id AND i.status = 'sent' AND i.paid_at IS NULL
                AND lower(CAST(COALESCE(cl.dunning_paused, 0) AS text)) IN ('0', 'false', 'f', 'no'))
  AND COALESCE((SELECT MAX(l.step_rank) FROM dueflow_ledger l
                WHERE l.job = 'dunning' AND l.subject_id = c.subject_id), 0) = c.step_rank - 1
  AND (c.step_rank = 1 OR EXISTS (
        SELECT 1 FROM dueflow_ledger l
        WHERE l.job = 'dunning' AND l.subject_id = c.subject_id
          AND l.step_rank = c.step_rank - 1 AND l.as_of <= c.previous_by))
ON CONFLICT (key) DO NOTHING
RETURNING key
