-- Extraction runs in its own read-only transaction: no JIT for it. Its per-row index probes
-- (sql/fragments/renewal_settled) make the estimated cost look large, and compiling took
-- seconds for a query that runs in tens of milliseconds (docs/performance.md).
SET LOCAL jit = off
