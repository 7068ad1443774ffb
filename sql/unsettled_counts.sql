-- How many rows of the whole ledger are in doubt (pending, handed to SMTP), failed (to be
-- retried: `failed`; refused for good: `permanent`), never handed to SMTP (pending without a
-- claim: the next run sends them), or bounced.
SELECT CASE WHEN status = 'pending' AND sending_at IS NULL THEN 'unsent'
            WHEN status = 'failed' AND permanent THEN 'permanent' ELSE status END AS state,
       COUNT(*) AS n
FROM dueflow_ledger
WHERE status IN ('pending', 'failed', 'bounced')
GROUP BY CASE WHEN status = 'pending' AND sending_at IS NULL THEN 'unsent'
              WHEN status = 'failed' AND permanent THEN 'permanent' ELSE status END
