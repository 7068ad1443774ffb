-- One ledger row moved to its subject's new spelling: its key made again (tasks/core/keys.py),
-- everything else kept — status, dates, the stored message and its Message-ID, so a late
-- bounce still finds it. A row whose new key is already taken stays where it is.
UPDATE dueflow_ledger
SET key = :new_key, subject_id = :new_id, subject_form = :subject_form, updated_at = CURRENT_TIMESTAMP
WHERE key = :old_key
  AND NOT EXISTS (SELECT 1 FROM dueflow_ledger t WHERE t.key = :new_key)
