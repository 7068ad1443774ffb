-- How many rows of the whole ledger are in doubt (pending, handed to SMTP), failed, or
-- never handed to SMTP (pending without a claim: the next run sends them), or bounced.
SELECT CASE WHEN status = 'pending' AND sending_at IS NULL THEN 'unsent' ELSE status END AS state,
       COUNT(*) AS n
FROM dueflow_ledger
WHERE status IN ('pending', 'failed', 'bounced')
GROUP BY CASE WHEN status = 'pending' AND sending_at IS NULL THEN 'unsent' ELSE status END
