-- The most urgent lead already reserved per contract and renewal cycle, for the (contract,
-- cycle) pairs extracted tonight and not settled (a JSON array of [id, cycle]), from the first
-- renewal date the night alerts (:since, the day after the last business day): probes of
-- the renewals index instead of a scan of every cycle still ahead.
SELECT m.subject_id, m.cycle, MIN(m.step_rank) AS handled_rank
FROM dueflow_ledger m
JOIN (SELECT DISTINCT e ->> 0 AS subject_id, e ->> 1 AS cycle
      FROM json_array_elements(CAST(:pairs AS json)) AS e) w
  ON m.cycle = w.cycle AND m.subject_id = w.subject_id
WHERE m.job = 'renewal' AND m.cycle >= :since
GROUP BY m.subject_id, m.cycle
