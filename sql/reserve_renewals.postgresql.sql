-- Reserve renewal alerts: one statement for the whole night, fed with arrays. Returns
-- only the keys this run won (G1: the PRIMARY KEY settles every race). The caller holds a
-- transaction-scoped advisory lock for the job, so the ordering check sees every
-- reservation committed before it. created_at is taken after that lock (the column's
-- default, the transaction's start, is not): it orders reservations as they were made.
INSERT INTO dueflow_ledger (key, job, subject_id, subject_form, cycle, step, step_rank, recipient, as_of, flow_run_id,
                            status, created_at)
SELECT x.key, 'renewal', x.subject_id, x.subject_form, x.cycle, x.step, x.step_rank, x.recipient,
       CAST(:as_of AS date), :flow_run_id, :status, statement_timestamp()
FROM unnest(CAST(:keys AS text[]), CAST(:subject_ids AS text[]), CAST(:subject_forms AS text[]),
            CAST(:cycles AS text[]),
            CAST(:steps AS text[]), CAST(:step_ranks AS integer[]), CAST(:recipients AS text[]),
            CAST(:previous_by AS date[]))
     AS x(key, subject_id, subject_form, cycle, step, step_rank, recipient, previous_by)
WHERE /*include renewal_no_more_urgent*/
ON CONFLICT (key) DO NOTHING
RETURNING key
