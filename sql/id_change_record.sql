-- What an operator decided about a pair of ids (`dueflow rekey`): `same` (its history moved
-- to the new id) or `apart` (different records), by whom and when.
INSERT INTO dueflow_id_changes (job, old_id, new_id, decision, rows_moved, decided_by)
VALUES (:job, :old_id, :new_id, :decision, :rows_moved, :decided_by)
ON CONFLICT (job, old_id, new_id) DO UPDATE
SET decision = excluded.decision, rows_moved = dueflow_id_changes.rows_moved + excluded.rows_moved,
    decided_by = excluded.decided_by, decided_at = CURRENT_TIMESTAMP
