-- The ledger rows of one subject, whose keys `dueflow rekey --apply` makes again with the
-- subject's new spelling.
SELECT key, cycle, step FROM dueflow_ledger WHERE job = :job AND subject_id = :old_id
