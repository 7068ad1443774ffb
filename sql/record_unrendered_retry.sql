-- A failed row due for another attempt whose message could not be rendered again (its
-- invoice PDF changed, its source row went bad): not sent again, and the attempt counts
-- (G4's bounded policy: after the last one it waits for a person like any failure). Its
-- error says tonight's reason, and the next attempt waits the back-off.
UPDATE dueflow_ledger
SET error = :error, attempts = attempts + 1, retry_after = :retry_after, updated_at = CURRENT_TIMESTAMP
WHERE key = :key AND status = 'failed' AND NOT permanent
