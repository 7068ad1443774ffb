-- The ledger's first night: a run for an earlier one is refused unless it is meant (a
-- backfill, docs/parameters.md). Read only for a night before today.
SELECT MIN(as_of) AS first_night FROM dueflow_ledger
