-- SQLite flavour of renewal_history_of.postgresql.sql.
SELECT m.subject_id, m.cycle, MIN(m.step_rank) AS handled_rank
FROM dueflow_ledger m
JOIN (SELECT DISTINCT json_extract(e.value, '$[0]') AS subject_id,
                      json_extract(e.value, '$[1]') AS cycle
      FROM json_each(:pairs) AS e) w
  ON m.cycle = w.cycle AND m.subject_id = w.subject_id
WHERE m.job = 'renewal' AND m.cycle >= :since
GROUP BY m.subject_id, m.cycle
