-- One night's figures (tasks/core/guard.py) and, when it looked wrong, who approved what
-- (a rerun of the same run replaces its own row).
INSERT INTO dueflow_nights (as_of, flow_run_id, figures, tripped, choice, up_to, approved_by, approved_at)
VALUES (:as_of, :flow_run_id, :figures, :tripped, :choice, :up_to, :approved_by, :approved_at)
ON CONFLICT (as_of, flow_run_id) DO UPDATE
SET figures = excluded.figures, tripped = excluded.tripped, choice = excluded.choice,
    up_to = excluded.up_to, approved_by = excluded.approved_by, approved_at = excluded.approved_at,
    recorded_at = CURRENT_TIMESTAMP
