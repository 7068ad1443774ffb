-- Before storing the messages of many keys just reserved (a first night, a surge): the
-- planner's statistics still describe the ledger before them, and store_messages joins
-- 5,000 keys at a time against exactly those rows (seen: over four minutes for the first
-- 5,000 of 88,000 keys). Estimating "one pending row",
-- PostgreSQL may rescan them for every key: minutes instead of a second. ANALYZE samples
-- at most 30,000 rows (0.1–0.8 s on a million-row ledger).
ANALYZE dueflow_ledger
