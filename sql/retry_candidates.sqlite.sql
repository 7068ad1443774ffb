-- SQLite flavour of retry_candidates.postgresql.sql (the same fragments).
SELECT x.key, x.job, x.subject_id, x.cycle, x.step, x.step_rank, x.as_of, x.recipient,
       x.permanent, x.paragraph, x.draft_source, x.draft_note, x.tone_plan, x.attachment_sha256
FROM dueflow_ledger AS x
WHERE x.status = 'failed'
  AND (x.permanent OR (x.attempts < :max_attempts
                       AND (x.retry_after IS NULL OR x.retry_after <= :now)))
  AND (/*include still_due*/)
ORDER BY x.key
