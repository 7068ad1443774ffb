-- The first CTEs of every dunning candidates statement: steps, each invoice's last step in
-- the ledger; dated, the invoices whose last step's wait is over (ranks 1 and 2).
steps AS MATERIALIZED (
    SELECT m.subject_id, MAX(m.step_rank) AS step_rank
    FROM dueflow_ledger m WHERE m.job = 'dunning'
    GROUP BY m.subject_id
), dated AS MATERIALIZED (
    SELECT s.subject_id
    FROM steps s
    JOIN dueflow_ledger m ON m.job = 'dunning' AND m.subject_id = s.subject_id AND m.step_rank = s.step_rank
    WHERE (s.step_rank = 1 AND COALESCE(m.attempt_as_of, m.as_of) <= CAST(:after_first_by AS date))
       OR (s.step_rank = 2 AND COALESCE(m.attempt_as_of, m.as_of) <= CAST(:after_second_by AS date))
)
