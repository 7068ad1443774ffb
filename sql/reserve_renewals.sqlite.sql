-- SQLite flavour of reserve_renewals.postgresql.sql. The candidates were loaded
-- into the temporary table `candidate` in the same BEGIN IMMEDIATE transaction,
-- which also serialises this statement against every other writer.
INSERT INTO dueflow_ledger (key, job, subject_id, cycle, step, step_rank, recipient, as_of, flow_run_id,
                            status)
SELECT c.key, 'renewal', c.subject_id, c.cycle, c.step, c.step_rank, c.recipient,
       :as_of, :flow_run_id, :status
FROM candidate c
WHERE NOT EXISTS (
    SELECT 1 FROM dueflow_ledger l
    WHERE l.job = 'renewal' AND l.subject_id = c.subject_id AND l.cycle = c.cycle
      AND l.step_rank < c.step_rank)
ON CONFLICT (key) DO NOTHING
RETURNING key
