-- The outcome of one send, on the row the delivery claimed (G3, G4): `sent`, `failed`
-- (retryable after retry_after unless permanent), or still `pending` with the error when
-- the content may have left. Only this delivery's claim is settled, and only once. A
-- statement's outcome is its carrier's key's, and goes on each of its rows.
UPDATE dueflow_ledger
SET status = :status, smtp_response = :smtp_response, error = :error,
    permanent = :permanent, retry_after = :retry_after,
    sent_at = CASE WHEN :status = 'sent' THEN CURRENT_TIMESTAMP ELSE sent_at END,
    updated_at = CURRENT_TIMESTAMP
WHERE (key = :key OR statement_key = :key) AND status = 'pending' AND claim_token = :token
