-- SQLite flavour of dunning_waits.postgresql.sql.
steps AS MATERIALIZED (
    SELECT m.subject_id, MAX(m.step_rank) AS step_rank
    FROM dueflow_ledger m WHERE m.job = 'dunning'
    GROUP BY m.subject_id
), dated AS MATERIALIZED (
    SELECT s.subject_id
    FROM steps s
    JOIN dueflow_ledger m ON m.job = 'dunning' AND m.subject_id = s.subject_id AND m.step_rank = s.step_rank
    WHERE (s.step_rank = 1 AND COALESCE(m.attempt_as_of, m.as_of) <= :after_first_by)
       OR (s.step_rank = 2 AND COALESCE(m.attempt_as_of, m.as_of) <= :after_second_by)
)
