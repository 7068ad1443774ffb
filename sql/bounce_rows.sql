-- Rows with a hard bounce not yet settled by an operator become `bounced` (G3): only rows
-- that were handed to SMTP (sent, or pending with a claim: the bounce settles the doubt).
-- The reason is the earliest such report's, by its own date, whatever order reports arrive
-- in. A row already bounced is not marked again (RETURNING: the rows marked now). A report
-- about a statement (recorded on its carrier's key) marks every row of it.
UPDATE dueflow_ledger
SET status = 'bounced',
    error = (SELECT 'bounced: ' || COALESCE(b.status_code || ' ', '') || COALESCE(b.diagnostic, '')
             FROM dueflow_bounces b
             WHERE b.key = COALESCE(dueflow_ledger.statement_key, dueflow_ledger.key)
               AND b.kind = 'hard' AND b.settled_at IS NULL
             ORDER BY b.seen_at, b.report_id LIMIT 1),
    updated_at = CURRENT_TIMESTAMP
WHERE (status = 'sent' OR (status = 'pending' AND sending_at IS NOT NULL))
  AND (key IN (SELECT b.key FROM dueflow_bounces b WHERE b.kind = 'hard' AND b.settled_at IS NULL)
       OR statement_key IN (SELECT b.key FROM dueflow_bounces b WHERE b.kind = 'hard' AND b.settled_at IS NULL))
RETURNING key
