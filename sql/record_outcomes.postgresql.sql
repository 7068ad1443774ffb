-- The outcomes of one group of sends in one statement (PostgreSQL; sql/record_outcome is
-- the same UPDATE row by row, for SQLite): each row this delivery claimed, and each other
-- row of a statement whose carrier it sent, takes its key's outcome — `sent`, `failed`
-- (retryable after retry_after unless permanent), or still `pending` with the error (G3,
-- G4). Only this delivery's claims, and only once. One round trip per group instead of one
-- per email; two disjoint parts, each joined to the outcomes through its own index (by key;
-- by statement_key), never by reading every open row (see sql/claim_sending).
WITH outcome AS (
    SELECT * FROM unnest(CAST(:keys AS text[]), CAST(:statuses AS text[]), CAST(:smtp_responses AS text[]),
                         CAST(:errors AS text[]), CAST(:permanents AS boolean[]),
                         CAST(:retry_afters AS timestamptz[]))
                  AS o (key, status, smtp_response, error, permanent, retry_after)
), own AS (
    UPDATE dueflow_ledger AS l
    SET status = o.status, smtp_response = o.smtp_response, error = o.error,
        permanent = o.permanent, retry_after = o.retry_after,
        sent_at = CASE WHEN o.status = 'sent' THEN CURRENT_TIMESTAMP ELSE l.sent_at END,
        updated_at = CURRENT_TIMESTAMP
    FROM outcome AS o
    WHERE l.key = o.key AND l.status = 'pending' AND l.claim_token = :token
)
UPDATE dueflow_ledger AS l
SET status = o.status, smtp_response = o.smtp_response, error = o.error,
    permanent = o.permanent, retry_after = o.retry_after,
    sent_at = CASE WHEN o.status = 'sent' THEN CURRENT_TIMESTAMP ELSE l.sent_at END,
    updated_at = CURRENT_TIMESTAMP
FROM outcome AS o
WHERE l.statement_key = o.key AND l.key <> ALL(CAST(:keys AS text[]))
  AND l.status = 'pending' AND l.claim_token = :token
