-- How a reservation's statement runs (this transaction only). Every check in
-- reserve_*.postgresql.sql is an index probe per candidate: microseconds each, whatever the
-- ledger's size.
-- - No merge or hash joins. Given 100,000 candidates, the planner traded the probes of
--   renewal_no_more_urgent for a merge anti join over the whole renewals index of the
--   ledger: 7 s instead of 0.4 s on the benchmark's ledger of 2.4 million rows (heap
--   fetches for every entry), and a scan grows with the ledger (docs/performance.md).
-- - No JIT: the probes make the estimated cost look large; compiling the dunning statement
--   took 0.4 s for a statement that ran in 0.6 s.
-- - work_mem 64 MB: the unnested candidates are materialised; at the default 4 MB a night
--   of 100,000 candidates spills them to a temporary file.
SELECT set_config('enable_mergejoin', 'off', true), set_config('enable_hashjoin', 'off', true),
       set_config('jit', 'off', true), set_config('work_mem', '64MB', true)
