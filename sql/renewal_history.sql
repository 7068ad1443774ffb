-- The most urgent lead already reserved per contract and renewal cycle, for the
-- cycles that can still be alerted (renewal date today or later).
SELECT subject_id, cycle, MIN(step_rank) AS handled_rank
FROM dueflow_ledger
WHERE job = 'renewal' AND cycle >= :as_of
GROUP BY subject_id, cycle
