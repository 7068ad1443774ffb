-- The bounce reports of a moved ledger row follow its key.
UPDATE dueflow_bounces SET key = :new_key WHERE key = :old_key
