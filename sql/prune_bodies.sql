-- Retention (docs/operations.md, "Retention"): a settled row — `sent` or `adopted` — whose
-- step got out before the date given (the date of the run that sent it, else that reserved it)
-- loses what it says to and about a person: its bodies, subject, addresses (recipient, the
-- one it was retried from, Cc, Bcc), paragraph and note, a model's refused answer, the server's reply and
-- error, the invoice PDF's path and name. What G1 and the rules need stays for ever: the
-- key, job, subject, cycle, step, status, dates, attempts, Message-ID (a late bounce still
-- finds its row), the copies' digests (sql/prune_copies: a copy's bounce is still a copy's),
-- and the PDF's size and SHA-256; pruned_at says when. Pending, failed and
-- bounced rows are never touched: they may still be sent, or wait for a person. At most
-- a batch of rows per statement, so that years of rows are pruned without a long lock.
UPDATE dueflow_ledger
SET recipient = NULL, previous_recipient = NULL, cc_recipient = NULL, bcc_recipient = NULL,
    subject = NULL, body_text = NULL, body_html = NULL, paragraph = NULL, draft_note = NULL,
    refused_answer = NULL,
    smtp_response = NULL, error = NULL, attachment_path = NULL, attachment_name = NULL,
    attachment_note = NULL, pruned_at = CURRENT_TIMESTAMP
WHERE key IN (SELECT key FROM dueflow_ledger
              WHERE status IN ('sent', 'adopted') AND pruned_at IS NULL
                AND COALESCE(attempt_as_of, as_of) < :before
              ORDER BY key
              LIMIT :batch)
  AND status IN ('sent', 'adopted') AND pruned_at IS NULL
