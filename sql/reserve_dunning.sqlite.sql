-- SQLite flavour of reserve_dunning.postgresql.sql (the same fragments). The candidates
-- were loaded into the temporary table `candidate` in the same BEGIN IMMEDIATE
-- transaction, which serialises this statement against every other writer.
INSERT INTO dueflow_ledger (key, job, subject_id, subject_form, cycle, step, step_rank, recipient, as_of, flow_run_id,
                            status)
SELECT x.key, 'dunning', x.subject_id, x.subject_form, x.cycle, x.step, x.step_rank, x.recipient,
       :as_of, :flow_run_id, :status
FROM candidate x
WHERE /*include invoice_open*/
  AND /*include dunning_step_is_next*/
ON CONFLICT (key) DO NOTHING
RETURNING key
