-- SQLite flavour of reserve_renewals.postgresql.sql. The candidates were loaded into the
-- temporary table `candidate` in the same BEGIN IMMEDIATE transaction, which serialises
-- this statement against every other writer.
INSERT INTO dueflow_ledger (key, job, subject_id, subject_form, cycle, step, step_rank, recipient, as_of, flow_run_id,
                            status)
SELECT x.key, 'renewal', x.subject_id, x.subject_form, x.cycle, x.step, x.step_rank, x.recipient,
       :as_of, :flow_run_id, :status
FROM candidate x
WHERE /*include renewal_no_more_urgent*/
ON CONFLICT (key) DO NOTHING
RETURNING key
