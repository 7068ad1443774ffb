-- SQLite flavour of release_claims.postgresql.sql.
UPDATE dueflow_ledger
SET sending_at = NULL, claim_token = NULL, attempts = attempts - 1, updated_at = CURRENT_TIMESTAMP
WHERE (key IN (SELECT value FROM json_each(:keys)) OR statement_key IN (SELECT value FROM json_each(:keys)))
  AND status = 'pending' AND claim_token = :token
