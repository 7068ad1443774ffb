-- Pending rows never handed to SMTP (no claim) that are no longer meant to go out — the
-- contract changed, the invoice was paid, a later step exists — are settled `failed`: known
-- not sent, and retried only if they become due again. Everything else unclaimed is sent.
UPDATE dueflow_ledger AS x
SET status = 'failed', updated_at = CURRENT_TIMESTAMP,
    error = 'not sent: no longer due when a run went to send it (contract changed, invoice'
            || ' paid or paused, or a later step exists)'
WHERE x.status = 'pending' AND x.sending_at IS NULL AND NOT (/*include still_due*/)
RETURNING key
