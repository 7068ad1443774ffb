-- The ledger for `dueflow ledger` (and its exports), streamed: every column an analyst may
-- want except the message bodies (the Message-ID and the SMTP reply included: what an operator
-- matches in the mail server's log before `dueflow resolve`), oldest first (a row retention pruned has pruned_at set
-- and its addresses and subject empty: docs/operations.md, "Retention"); each filter is off when its parameter is
-- NULL. `since`/`until` bound the business date of the reserving run (as_of), inclusive.
-- `limit` is always given (a very large number for "all"): SQLite refuses LIMIT NULL and
-- PostgreSQL a negative LIMIT, and both treat a large one as no limit at all.
SELECT key, job, subject_id, cycle, step, step_rank, as_of, status, attempts, permanent,
       recipient, subject, draft_source, draft_note, tone_plan, message_id, smtp_response, error, retry_after, flow_run_id,
       created_at, updated_at, sending_at, sent_at, attempt_as_of,
       cc_recipient, bcc_recipient, attachment_name, attachment_sha256, attachment_size,
       attachment_note, pruned_at, resolved_by, resolved_at, statement_key
FROM dueflow_ledger
WHERE (:job IS NULL OR job = :job)
  AND (:status IS NULL OR status = :status)
  AND (:since IS NULL OR as_of >= :since)
  AND (:until IS NULL OR as_of <= :until)
ORDER BY created_at, key
LIMIT :limit
