-- Reserve renewal alerts: one statement for the whole night, fed with arrays.
-- Returns only the keys this run won (G1: the PRIMARY KEY settles every race).
-- The NOT EXISTS keeps the renewal rule "never a lead after a more urgent lead of
-- the same cycle" even for a stale run; the caller holds a transaction-scoped
-- advisory lock for the job so that check and insert see every committed reservation.
-- created_at is this statement's start, after the lock was granted, so it orders
-- reservations as they were made; the column default, now(), is the transaction's
-- start, taken before the lock, which two racing runs may be granted in the other order.
INSERT INTO dueflow_ledger (key, job, subject_id, cycle, step, step_rank, recipient, as_of, flow_run_id,
                            status, created_at)
SELECT c.key, 'renewal', c.subject_id, c.cycle, c.step, c.step_rank, c.recipient,
       CAST(:as_of AS date), :flow_run_id, :status, statement_timestamp()
FROM unnest(CAST(:keys AS text[]), CAST(:subject_ids AS text[]), CAST(:cycles AS text[]),
            CAST(:steps AS text[]), CAST(:step_ranks AS integer[]), CAST(:recipients AS text[]),
            CAST(:previous_by AS date[]))
     AS c(key, subject_id, cycle, step, step_rank, recipient, previous_by)
WHERE NOT EXISTS (
    SELECT 1 FROM dueflow_ledger l
    WHERE l.job = 'renewal' AND l.subject_id = c.subject_id AND l.cycle = c.cycle
      AND l.step_rank < c.step_rank)
ON CONFLICT (key) DO NOTHING
RETURNING key
