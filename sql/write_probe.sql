-- Can this session write dueflow's own tables? An update of no row, rolled back by the
-- caller: a read-only transaction or a missing privilege refuses it all the same, before
-- a night writes anything.
UPDATE dueflow_ledger SET updated_at = updated_at WHERE 1 = 0
