-- SQLite flavour of reserve_dunning.postgresql.sql (the same fragments). The candidates
-- were loaded into the temporary table `candidate` in the same BEGIN IMMEDIATE
-- transaction, which serialises this statement against every other writer.
WITH payments_wanted AS MATERIALIZED (
    SELECT subject_id AS invoice_id FROM candidate
), paid AS MATERIALIZED /*include payments_of*/
INSERT INTO dueflow_ledger (key, job, subject_id, subject_form, cycle, step, step_rank, recipient, as_of, flow_run_id,
                            status)
SELECT x.key, 'dunning', x.subject_id, x.subject_form, x.cycle, x.step, x.step_rank, x.recipient,
       :as_of, :flow_run_id, :status
FROM candidate x
LEFT JOIN paid r ON r.invoice_id = x.subject_id
WHERE /*include invoice_open*/
  AND /*include dunning_step_is_next*/
  AND (x.payment_state IS NULL
       OR x.payment_state = (SELECT /*include payment_state*/ FROM invoices i WHERE i.id = x.subject_id LIMIT 1))
ON CONFLICT (key) DO NOTHING
RETURNING key
