-- Failed rows that may go out again tonight (G4), with what a retry renders them from:
-- a transient failure due for another attempt, and any permanent one (a mailbox refused
-- it: retried only if the address it would go to now differs — the caller compares).
-- Only rows still meant to go out; never `pending` ones (G3).
SELECT x.key, x.job, x.subject_id, x.cycle, x.step, x.step_rank, x.as_of, x.recipient,
       x.permanent, x.paragraph, x.draft_source, x.draft_note, x.tone_plan, x.attachment_sha256
FROM dueflow_ledger AS x
WHERE x.status = 'failed'
  AND (x.permanent OR (x.attempts < :max_attempts
                       AND (x.retry_after IS NULL OR x.retry_after <= CAST(:now AS timestamptz))))
  AND (/*include still_due*/)
ORDER BY x.key
