-- Rows a delivery claimed and then did not hand to SMTP (it was told to stop): back to
-- unclaimed, the attempt uncounted, so a later run sends them without anyone's help; a
-- statement's carrier, with its other rows.
UPDATE dueflow_ledger
SET sending_at = NULL, claim_token = NULL, attempts = attempts - 1, updated_at = CURRENT_TIMESTAMP
WHERE (key = ANY(CAST(:keys AS text[])) OR statement_key = ANY(CAST(:keys AS text[])))
  AND status = 'pending' AND claim_token = :token
