-- A bounced row says the earliest unsettled hard bounce's reason, also when an earlier-dated
-- report arrived after a later one (the ledger does not depend on arrival order); the rows of
-- a statement, its carrier's.
UPDATE dueflow_ledger
SET error = (SELECT 'bounced: ' || COALESCE(b.status_code || ' ', '') || COALESCE(b.diagnostic, '')
             FROM dueflow_bounces b
             WHERE b.key = COALESCE(dueflow_ledger.statement_key, dueflow_ledger.key) AND b.kind = 'hard' AND b.settled_at IS NULL
             ORDER BY b.seen_at, b.report_id LIMIT 1)
WHERE status = 'bounced'
  AND (key IN (SELECT b.key FROM dueflow_bounces b WHERE b.kind = 'hard' AND b.settled_at IS NULL)
       OR statement_key IN (SELECT b.key FROM dueflow_bounces b WHERE b.kind = 'hard' AND b.settled_at IS NULL))
  AND error IS DISTINCT FROM (SELECT 'bounced: ' || COALESCE(b.status_code || ' ', '') || COALESCE(b.diagnostic, '')
             FROM dueflow_bounces b
             WHERE b.key = COALESCE(dueflow_ledger.statement_key, dueflow_ledger.key) AND b.kind = 'hard' AND b.settled_at IS NULL
             ORDER BY b.seen_at, b.report_id LIMIT 1)
