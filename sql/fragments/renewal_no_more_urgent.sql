-- No lead more urgent than x's is in the ledger for its cycle: a lead is never sent after
-- a more urgent lead of the same cycle, even by a stale run.
NOT EXISTS (SELECT 1 FROM dueflow_ledger m
            WHERE m.job = 'renewal' AND m.subject_id = x.subject_id AND m.cycle = x.cycle
              AND m.step_rank < x.step_rank)
