-- Reserve dunning steps: one statement for the whole night, fed with arrays. Besides the
-- PRIMARY KEY (G1), each candidate must still hold against the live rows: the invoice is
-- still open (one paid after extraction gets no reminder) and the step is the next one,
-- after a previous step that went out long enough ago. The caller holds a
-- transaction-scoped advisory lock for the job, so these checks see every reservation
-- committed before this statement; created_at is taken after that lock. What the open
-- amount is read from (sql/fragments/payment_state) must be what the extract read: an
-- invoice paid in part or in full after it gets no reminder tonight.
WITH payments_wanted AS MATERIALIZED (
    SELECT w.invoice_id FROM unnest(CAST(:subject_ids AS text[])) AS w(invoice_id)
), paid AS MATERIALIZED /*include payments_of*/
INSERT INTO dueflow_ledger (key, job, subject_id, subject_form, cycle, step, step_rank, recipient, as_of, flow_run_id,
                            status, created_at)
SELECT x.key, 'dunning', x.subject_id, x.subject_form, x.cycle, x.step, x.step_rank, x.recipient,
       CAST(:as_of AS date), :flow_run_id, :status, statement_timestamp()
FROM unnest(CAST(:keys AS text[]), CAST(:subject_ids AS text[]), CAST(:subject_forms AS text[]),
            CAST(:cycles AS text[]),
            CAST(:steps AS text[]), CAST(:step_ranks AS integer[]), CAST(:recipients AS text[]),
            CAST(:previous_by AS date[]), CAST(:payment_states AS text[]))
     AS x(key, subject_id, subject_form, cycle, step, step_rank, recipient, previous_by, payment_state)
LEFT JOIN paid r ON r.invoice_id = x.subject_id
-- EXISTS of primary-key lookups, not JOINs (docs/performance.md).
WHERE /*include invoice_open*/
  AND /*include dunning_step_is_next*/
  AND (x.payment_state IS NULL
       OR x.payment_state = (SELECT /*include payment_state*/ FROM invoices i WHERE i.id = x.subject_id LIMIT 1))
ON CONFLICT (key) DO NOTHING
RETURNING key
