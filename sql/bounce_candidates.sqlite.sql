-- The ledger rows a batch of reports may be about, by the Message-IDs they quote.
-- Its copies (Cc, Bcc; once pruned, their digests): a report about one of them is not about
-- the recipient. The rows of a statement share its Message-ID: the carrier's row speaks for
-- them (sql/bounce_rows marks each).
SELECT key, message_id, status, sending_at, recipient, cc_recipient, bcc_recipient, copy_digests
FROM dueflow_ledger
WHERE message_id IN (SELECT value FROM json_each(:ids))
  AND (statement_key IS NULL OR statement_key = key)
