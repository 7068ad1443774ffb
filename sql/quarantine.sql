-- Keep a bad source row with its reason (G6), one row per (job, source row, reason),
-- refreshed each night the problem is still there.
INSERT INTO dueflow_quarantine (job, source_id, reason, first_as_of, last_as_of, flow_run_id)
VALUES (:job, :source_id, :reason, :as_of, :as_of, :flow_run_id)
ON CONFLICT (job, source_id, reason) DO UPDATE
SET last_as_of = excluded.last_as_of, flow_run_id = excluded.flow_run_id,
    times_seen = dueflow_quarantine.times_seen + 1
